/** What the CLI was asked: a command's name and its words, or `timeout` through a link of that name. */
export interface Invocation {
  name: string | undefined;
  args: string[];
  /** Started as `timeout` (a link to our entry): every word is timeout's. */
  linked: boolean;
}

export function invocation(argv: readonly string[], script = ''): Invocation {
  if (/(^|[\\/])timeout$/.test(script)) return { name: 'timeout', args: [...argv], linked: true };
  const [name, ...args] = argv;
  return { name, args, linked: false };
}

/** The commands that pass a stop signal on to what they run. */
export const PASSES_SIGNALS_ON: readonly string[] = ['run', 'timeout'];
