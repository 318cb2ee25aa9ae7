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

export interface SplitOptions {
  /** Long options that may stand alone (they then get an empty value). */
  optionalValue?: readonly string[];
  /**
   * Read long options as getopt_long does, where a unique prefix names one (`--pres` is
   * `--preserve-status`): what timeout(1)'s users type. An ambiguous prefix is a usage error that
   * exits with this status.
   */
  prefixes?: { status: number };
}

/**
 * Splits `args` where the command begins: at `--` (dropped) or at the first word that is neither an
 * option nor an option's value, the way getopt's "+" mode does, so the command's own options are
 * never read as ours.
 */
export function splitAtCommand(
  args: readonly string[],
  options: Options,
  { optionalValue = [], prefixes }: SplitOptions = {},
): { ours: string[]; rest: string[] } {
  const ours: string[] = [];
  for (let i = 0; i < args.length; i++) {
    let arg = args[i] as string;
    if (arg === '--') return { ours, rest: args.slice(i + 1) };
    if (!arg.startsWith('-') || arg === '-') return { ours, rest: args.slice(i) };
    if (prefixes && arg.startsWith('--')) arg = fullLongName(arg, options, prefixes.status);
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

/** `--pre[=value]` as the one long option it begins, or as it is when it begins none. */
function fullLongName(arg: string, options: Options, status: number): string {
  const eq = arg.indexOf('=');
  const name = arg.slice(2, eq < 0 ? undefined : eq);
  if (Object.hasOwn(options, name)) return arg;
  const candidates = Object.keys(options).filter((o) => o.startsWith(name));
  if (candidates.length > 1) {
    const all = candidates.map((c) => `'--${c}'`).join(' ');
    throw new UsageError(`option '${arg}' is ambiguous; possibilities: ${all}`, status);
  }
  // None: parseArgs reports it as unrecognized.
  return candidates.length === 1 ? `--${candidates[0]}${eq < 0 ? '' : arg.slice(eq)}` : arg;
}

type Parsed<T extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: T; strict: true; allowPositionals: true }>
>;

/** An option as parseArgs' `tokens` list it, in the order given (and each time it is given). */
export interface OptionToken {
  kind: string;
  name?: string;
  value?: string;
}

/**
 * node:util parseArgs, with its errors turned into one-line usage errors. `withTokens`: also the
 * options in the order given.
 */
export function parseOptions<T extends Options>(
  args: string[],
  options: T,
  status: number,
  withTokens = false,
): Parsed<T> & { tokens?: OptionToken[] } {
  // Words without a dash are all positionals: what parseArgs would say, without its first call's
  // cost (1.3-1.8 ms, its module and validators loaded and run), which `timeout 10 true` would pay
  // for nothing. No option here has a default value that an empty result would leave out.
  if (args.every((arg) => !arg.startsWith('-'))) return { values: {}, positionals: [...args] } as Parsed<T>;
  for (const arg of args) {
    if (arg === '--') break;
    const dash = dashInGroup(arg, options);
    if (dash) throw new UsageError("invalid option -- '-'", status);
  }
  try {
    return parseArgs({
      args,
      options,
      strict: true,
      allowPositionals: true,
      tokens: withTokens,
    }) as Parsed<T> & {
      tokens?: OptionToken[];
    };
  } catch (error) {
    throw new UsageError(describeParseError(error as NodeJS.ErrnoException & Error, args), status);
  }
}

/**
 * A '-' among a short group's letters (`-v-x`): getopt says "invalid option -- '-'"; parseArgs
 * would read the rest as a word of its own. A letter that takes a value takes the rest as it.
 */
function dashInGroup(arg: string, options: Options): boolean {
  if (!arg.startsWith('-') || arg.startsWith('--')) return false;
  for (let i = 1; i < arg.length; i++) {
    if (arg[i] === '-') return true;
    if (Object.values(options).find((o) => o.short === arg[i])?.type === 'string') return false;
  }
  return false;
}

/** parseArgs' errors in getopt's words, which timeout(1) users (and their scripts) know. */
function describeParseError(error: NodeJS.ErrnoException & Error, args: readonly string[]): string {
  // parseArgs quotes the option as typed ('--foo', '-x') when it is unknown, else as declared
  // ('-s, --signal <value>', '--quiet').
  const quoted = /'(-[^']*)'/.exec(error.message)?.[1] ?? '';
  const names = quoted.replace(/ <value>$/, '').split(', ');
  const long = names.find((n) => n.startsWith('--'));
  const short = names.find((n) => !n.startsWith('--'));
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      if (!quoted.startsWith('--')) return `invalid option -- '${quoted.slice(1)}'`;
      // parseArgs names `--foo=bar` as `--foo`; getopt says the word as typed.
      const typed = args.find((a) => a.startsWith(`${quoted}=`)) ?? quoted;
      return `unrecognized option '${typed}'`;
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      // Only a long option can be given a value it does not take (`--quiet=yes`).
      if (error.message.includes('does not take'))
        return `option '${long ?? short}' doesn't allow an argument`;
      // parseArgs refuses a value that starts with a dash (`--grace -1s`), where getopt takes it.
      if (error.message.includes('ambiguous')) {
        const name = long ?? short ?? '';
        const next = args[args.indexOf(name) + 1] ?? '';
        return `option '${name}' was followed by '${next}', which is read as an option; give a value that starts with '-' as ${name}=${next}`;
      }
      // Only the last word can lack its value: that word says which form was typed.
      const typedLong = long !== undefined && args.at(-1) === long;
      return typedLong || short === undefined
        ? `option '${long}' requires an argument`
        : `option requires an argument -- '${short.slice(1)}'`;
    }
    default:
      return error.message.split('. ')[0] ?? error.message;
  }
}

/**
 * A PID as typed: digits only (no sign, no space, no 0x), from 1 to the library's MAX_PID. Not
 * imported from it: this file is in the CLI's entry, which `--version` loads, and the library's
 * chunk would come with it.
 */
export function parsePid(text: string, status: number): number {
  const pid = Number(text);
  if (!/^\d+$/.test(text) || pid < 1 || pid > 0xffffffff) {
    throw new UsageError(`'${text}' is not a process id; give a whole number from 1 to 4294967295`, status);
  }
  return pid;
}
