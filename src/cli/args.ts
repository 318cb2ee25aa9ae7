import { type ParseArgsConfig, parseArgs } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Bad command-line input: main prints the message (one line) and exits with `status`. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** Print a "Try '... --help'" hint after the message. */
    readonly hint = true,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

function takesValue(options: Options, arg: string): boolean {
  if (arg.startsWith('--')) {
    if (arg.includes('=')) return false;
    return options[arg.slice(2)]?.type === 'string';
  }
  // A short group like -vk: the first letter that takes a value takes the rest, or the next word.
  for (let i = 1; i < arg.length; i++) {
    const entry = Object.values(options).find((o) => o.short === arg[i]);
    if (entry?.type === 'string') return i === arg.length - 1;
  }
  return false;
}

/**
 * Splits `args` where the command begins: at `--` (dropped) or at the first word that is neither an
 * option nor an option's value, the way getopt's "+" mode does, so the command's own options are
 * never read as ours. Options in `optionalValue` may stand alone (they then get an empty value).
 */
export function splitAtCommand(
  args: readonly string[],
  options: Options,
  optionalValue: readonly string[] = [],
): { ours: string[]; rest: string[] } {
  const ours: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') return { ours, rest: args.slice(i + 1) };
    if (!arg.startsWith('-') || arg === '-') return { ours, rest: args.slice(i) };
    if (optionalValue.includes(arg.slice(2)) && arg.startsWith('--')) {
      // `--json FILE` takes the next word only when it can be a file: `--json -- cmd` has none.
      const next = args[i + 1];
      if (next === undefined || (next.startsWith('-') && next !== '-')) {
        ours.push(`${arg}=`);
        continue;
      }
    }
    const value = takesValue(options, arg) ? args[i + 1] : undefined;
    if (value === undefined) ours.push(arg);
    else {
      i++;
      // As getopt does, the next word is the value even when it starts with a dash (`--timeout -1`
      // is a bad duration, not a missing one); attached, parseArgs cannot mistake it for an option.
      if (value.startsWith('-')) ours.push(`${arg}${arg.startsWith('--') ? '=' : ''}${value}`);
      else ours.push(arg, value);
    }
  }
  return { ours, rest: [] };
}

type Parsed<T extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: T; strict: true; allowPositionals: true }>
>;

/** node:util parseArgs, with its errors turned into one-line usage errors. */
export function parseOptions<T extends Options>(args: string[], options: T, status: number): Parsed<T> {
  // Words without a dash are all positionals: what parseArgs would say, without its first call's
  // cost (1.3-1.8 ms, its module and validators loaded and run), which `timeout 10 true` would pay
  // for nothing. No option here has a default value that an empty result would leave out.
  if (args.every((arg) => !arg.startsWith('-'))) return { values: {}, positionals: [...args] } as Parsed<T>;
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError(describeParseError(error as NodeJS.ErrnoException & Error), status);
  }
}

function describeParseError(error: NodeJS.ErrnoException & Error): string {
  const quoted = /'(-[^']*)'/.exec(error.message)?.[1] ?? '';
  const option = quoted.split(' ')[0] ?? quoted;
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      // getopt's wording, which timeout(1) users (and their scripts) know.
      return option.startsWith('--')
        ? `unrecognized option '${option}'`
        : `invalid option -- '${option.slice(1)}'`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return error.message.includes('does not take')
        ? `option '${option}' does not take a value`
        : `option '${option}' needs a value`;
    default:
      return error.message.split('. ')[0] ?? error.message;
  }
}
