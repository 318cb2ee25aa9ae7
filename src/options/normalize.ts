import { ProcwardenError, showValue } from '../errors.js';
import type { ContainmentMode, OutputOptions, PtyOptions, RunMode, RunSpec } from '../types.js';
import { cwdProblem } from './cwd.js';
import { checkDuration } from './duration.js';
import { normalizeSignal } from './signals.js';

export const DEFAULT_GRACE_MS = 5000;
export const DEFAULT_DRAIN_MS = 500;
/** The whole drain's bound when output keeps arriving (drainMs restarts with each chunk). */
export const DEFAULT_DRAIN_MAX_MS = 5000;
export const DEFAULT_MAX_BYTES = 1024 * 1024;
export const COOKIE_NAME = 'PROCWARDEN_RUN';
/**
 * The runs whose trees this process is in, besides its own run: a run started inside another run
 * (procwarden under procwarden, an agent's tool that supervises commands of its own) stays the
 * outer runs' member too, so a member that escapes the inner run with the inner cookie is still
 * found by the outer sweeps. Space-separated run ids, innermost last.
 */
export const OUTER_COOKIES_NAME = 'PROCWARDEN_OUTER_RUNS';
/** Run ids are `pw` + base 36 + hex + `-N`; anything else in the variables is not ours to carry. */
const COOKIE_WORD = /^[A-Za-z0-9_-]{1,64}$/;
/** Bounds the variable's growth however deep the nesting (the innermost are kept). */
const MAX_OUTER = 16;

/** The runs this process belongs to (its own environment's cookie and outer runs), for what it starts. */
function outerCookies(): string[] {
  const own = process.env[COOKIE_NAME];
  const words = [...(process.env[OUTER_COOKIES_NAME] ?? '').split(' '), own ?? ''];
  return [...new Set(words.filter((w) => COOKIE_WORD.test(w)))].slice(-MAX_OUTER);
}

/** A spec after validation: every default filled in, every value checked. */
export interface NormalSpec {
  argv: [string, ...string[]];
  mode: RunMode;
  cwd: string | undefined;
  /** The complete environment of the run, cookie included. */
  env: Record<string, string>;
  cookie: string | null;
  stdin: { kind: 'ignore' | 'pipe' | 'inherit' } | { kind: 'data'; data: Uint8Array };
  /** Sorted, distinct, each 3 or more. */
  inheritFds: number[];
  /** The command stays in our process group and session (RunSpec.inheritGroup). */
  inheritGroup: boolean;
  timeoutMs: number;
  noOutputTimeoutMs: number;
  graceMs: number;
  killSignal: NodeJS.Signals;
  drainMs: number;
  /** At least drainMs. */
  drainMaxMs: number;
  signal: AbortSignal | undefined;
  containment: ContainmentMode;
  leftovers: 'kill' | 'keep' | 'hold';
  /** 0: no limit. */
  holdMs: number;
  scope: string | undefined;
  replaceScope: boolean;
  maxBytes: number;
  onData: OutputOptions['onData'];
  onBytes: OutputOptions['onBytes'];
  file: string | undefined;
  /** stdout and stderr are the caller's own (not piped). */
  inheritOutput: boolean;
  pty: Required<PtyOptions>;
  /** How much the command's oom_score_adj is raised over the host's (RunSpec.oomScoreAdj); null: not at all. */
  oomScoreAdj: OomScoreSetting | null;
}

/** RunSpec.oomScoreAdj after validation. */
export interface OomScoreSetting {
  /** Added to the host's own oom_score_adj (the sum capped at 1000). */
  raise: number;
  /** Given by the spec or the supervisor's defaults, not the default: it must be applied or the run fails. */
  explicit: boolean;
}

/** RunSpec.oomScoreAdj's default: a run's processes are the OOM killer's choice before their host's. */
export const DEFAULT_OOM_SCORE_RAISE = 500;
/** From the lowest oom_score_adj (-1000) to the highest (1000). */
export const MAX_OOM_SCORE_RAISE = 2000;

const KNOWN_KEYS = new Set<string>([
  'argv',
  'mode',
  'shell',
  'cwd',
  'env',
  'extendEnv',
  'cookie',
  'stdin',
  'inheritFds',
  'inheritGroup',
  'timeoutMs',
  'noOutputTimeoutMs',
  'graceMs',
  'killSignal',
  'drainMs',
  'drainMaxMs',
  'signal',
  'containment',
  'leftovers',
  'holdMs',
  'oomScoreAdj',
  'scope',
  'replaceScope',
  'output',
  'pty',
]);

const OUTPUT_KEYS = ['maxBytes', 'onData', 'onBytes', 'file', 'inherit'];
const PTY_KEYS = ['cols', 'rows', 'term'];

/**
 * The options object of a call (cancel, shutdown, list): an object of known fields, or left out
 * (undefined or null). A misspelt field would otherwise be ignored without a word.
 */
export function checkOptions(value: unknown, known: readonly string[], what: string, example: string): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value))
    throw invalid(
      `${what} takes an options object (${example}), or nothing; got ${showValue(value)}.`,
      'INVALID_OPTION',
    );
  knownFields(value, known, what, 'option', 'INVALID_OPTION');
}

/** A misspelt field of a nested option (`maxbytes`) is refused as one of the spec's own is. */
function knownFields(
  value: object,
  known: readonly string[],
  what: string,
  noun = 'field',
  code: 'INVALID_SPEC' | 'INVALID_OPTION' = 'INVALID_SPEC',
): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key))
      throw invalid(
        `unknown ${what} ${noun} ${JSON.stringify(key)}; check its spelling (${what} takes ${known.join(', ')}).`,
        code,
      );
  }
}

function invalid(message: string, code: 'INVALID_SPEC' | 'INVALID_ARGV' | 'INVALID_OPTION' = 'INVALID_SPEC') {
  return new ProcwardenError(code, message);
}

/** An on/off option: true, false, or left out. */
export function checkSwitch(value: unknown, what: string): void {
  if (value !== undefined && typeof value !== 'boolean')
    throw invalid(`${what}: ${showValue(value)} is not true or false.`, 'INVALID_OPTION');
}

export function oneOf<T extends string>(value: unknown, allowed: readonly T[], what: string, fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalid(`${what}: ${showValue(value)} is not one of ${allowed.join(', ')}.`, 'INVALID_OPTION');
}

function optionalDuration(value: unknown, what: string, fallback: number): number {
  return value === undefined ? fallback : checkDuration(value, what);
}

/** A size in bytes is an option, not a duration: its error says bytes and carries INVALID_OPTION. */
function optionalByteCount(value: unknown, what: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalid(
      `${what}: ${showValue(value)} is not a valid size; give a whole number of bytes, 0 or more.`,
      'INVALID_OPTION',
    );
  }
  return value;
}

const MAX_ARGS = 1_000_000;
const MAX_CAPTURE_BYTES = 256 * 1024 * 1024;

/** An array's elements by index, its length read once. */
export function elements(array: readonly unknown[]): unknown[] {
  const length = array.length;
  const copy: unknown[] = new Array(length);
  for (let i = 0; i < length; i++) copy[i] = array[i];
  return copy;
}

function normalizeArgv(spec: RunSpec): [string, ...string[]] {
  const argv = spec.argv as unknown;
  if (!Array.isArray(argv) || argv.length === 0) {
    throw invalid(
      'argv must be a non-empty array: the command and its arguments, e.g. ["ls", "-l"].',
      'INVALID_ARGV',
    );
  }
  // No exec takes more (Linux: all of argv and the environment in 2 MB at most); an array claiming
  // more elements is refused before anything walks it.
  if (argv.length > MAX_ARGS) {
    throw invalid(
      `argv has ${argv.length} elements; no command line holds more than ${MAX_ARGS}.`,
      'INVALID_ARGV',
    );
  }
  // One read of each element by index, holes included (forEach skips them: ['echo', , 'x'] would
  // run `echo undefined x`), never through the array's own iterator: what is checked is what runs,
  // however the array behaves when read again.
  const copy = elements(argv);
  copy.forEach((arg, i) => {
    if (typeof arg !== 'string') {
      throw invalid(
        `argv[${i}] is ${typeof arg}, not a string; pass every argument as a string.`,
        'INVALID_ARGV',
      );
    }
    if (arg.includes('\0'))
      throw invalid(`argv[${i}] contains a NUL byte, which no command line can carry.`, 'INVALID_ARGV');
  });
  if (copy[0] === '') throw invalid('argv[0] is empty; it must name the command to run.', 'INVALID_ARGV');
  const list = copy as [string, ...string[]];
  return spec.shell ? ['/bin/sh', '-c', list.join(' ')] : list;
}

function normalizeEnv(spec: RunSpec, runId: string): { env: Record<string, string>; cookie: string | null } {
  if (
    spec.env !== undefined &&
    (typeof spec.env !== 'object' || spec.env === null || Array.isArray(spec.env))
  ) {
    throw invalid('env must be an object of string values.', 'INVALID_OPTION');
  }
  const env: Record<string, string> = {};
  if (spec.extendEnv !== false) {
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  }
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (v === undefined) {
      delete env[k];
      continue;
    }
    // The kernel takes NAME=value strings up to a NUL: a name with '=' would set another variable
    // (`A=B` set to x is `A` set to `B=x`), a NUL would cut it short. (Windows keeps per-drive
    // directories in names that begin with '=', such as `=C:`.)
    if (
      k === '' ||
      k === '=' ||
      k.indexOf('=', process.platform === 'win32' ? 1 : 0) >= 0 ||
      k.includes('\0')
    ) {
      throw invalid(
        `env has the name ${JSON.stringify(k)}; a variable's name must be non-empty, without '=' or NUL.`,
        'INVALID_OPTION',
      );
    }
    if (typeof v !== 'string') throw invalid(`env.${k} is ${typeof v}, not a string.`, 'INVALID_OPTION');
    if (v.includes('\0'))
      throw invalid(`env.${k} contains a NUL byte, which no environment can carry.`, 'INVALID_OPTION');
    env[k] = v;
  }
  // An inherited cookie belongs to an outer run: ours replaces it, so that sweeps see the innermost
  // owner, and it moves to the list of outer runs, so that the outer run still finds what this one
  // starts (without cookie: false for this run, never for theirs). Neither is the spec's to set.
  delete env[COOKIE_NAME];
  delete env[OUTER_COOKIES_NAME];
  const outer = outerCookies();
  if (outer.length > 0) env[OUTER_COOKIES_NAME] = outer.join(' ');
  const cookie = spec.cookie === false ? null : runId;
  if (cookie) env[COOKIE_NAME] = cookie;
  return { env, cookie };
}

/** What `handle.stdin.write()` takes: text (sent as UTF-8) or bytes; anything else is refused. */
export function checkInput(data: unknown): string | Uint8Array {
  if (typeof data === 'string' || data instanceof Uint8Array) return data;
  throw invalid(`stdin.write takes a string or a Uint8Array, not ${showValue(data)}.`, 'INVALID_OPTION');
}

/** The most descriptors a command is given this way: each is a slot of the spawn's stdio list. */
const MAX_INHERITED_FD = 4095;

function normalizeFds(value: unknown): number[] {
  if (value === undefined) return [];
  // Copied by index once (holes included): what is checked is what is used.
  const fds: unknown[] | null =
    Array.isArray(value) && value.length <= MAX_INHERITED_FD ? Array.from(value as unknown[]) : null;
  const ok = (fd: unknown) =>
    Number.isInteger(fd) && (fd as number) >= 3 && (fd as number) <= MAX_INHERITED_FD;
  const at = fds === null ? -1 : fds.findIndex((fd) => !ok(fd));
  if (fds === null || at >= 0) {
    throw invalid(
      `inheritFds: ${showValue(fds === null ? value : fds[at])} is not a descriptor to pass on; give an array of whole numbers from 3 to ${MAX_INHERITED_FD} (0, 1 and 2 are stdin, stdout and stderr).`,
      'INVALID_OPTION',
    );
  }
  return [...new Set(fds as number[])].sort((a, b) => a - b);
}

function normalizeStdin(value: RunSpec['stdin']): NormalSpec['stdin'] {
  if (value === undefined || value === 'ignore') return { kind: 'ignore' };
  if (value === 'pipe' || value === 'inherit') return { kind: value };
  if (typeof value === 'string') return { kind: 'data', data: Buffer.from(value, 'utf8') };
  // Copied: the caller may reuse its buffer once spawn() returns, and a run that waits (a
  // replaceScope, a full pipe) writes it later.
  if (value instanceof Uint8Array) return { kind: 'data', data: Buffer.from(value) };
  throw invalid("stdin must be 'ignore', 'pipe', 'inherit', a string or a Uint8Array.", 'INVALID_OPTION');
}

function normalizeOutput(output: OutputOptions | undefined) {
  if (output !== undefined && (typeof output !== 'object' || output === null)) {
    throw invalid('output must be an object: { maxBytes?, onData?, file? }.', 'INVALID_OPTION');
  }
  if (output) knownFields(output, OUTPUT_KEYS, 'output');
  const maxBytes = optionalByteCount(output?.maxBytes, 'output.maxBytes', DEFAULT_MAX_BYTES);
  // The captured text is one string: V8 makes none longer than 2^29 - 24 characters.
  if (maxBytes > MAX_CAPTURE_BYTES) {
    throw invalid(
      `output.maxBytes: ${maxBytes} is more than a captured text can hold (${MAX_CAPTURE_BYTES} bytes a stream); stream larger output with onData, onBytes or file.`,
      'INVALID_OPTION',
    );
  }
  if (output?.onData !== undefined && typeof output.onData !== 'function') {
    throw invalid('output.onData must be a function (text, stream) => void.', 'INVALID_OPTION');
  }
  if (output?.onBytes !== undefined && typeof output.onBytes !== 'function') {
    throw invalid('output.onBytes must be a function (chunk, stream) => void.', 'INVALID_OPTION');
  }
  if (output?.file !== undefined && (typeof output.file !== 'string' || output.file === '')) {
    throw invalid('output.file must be a non-empty path.', 'INVALID_OPTION');
  }
  checkSwitch(output?.inherit, 'output.inherit');
  const inherit = output?.inherit === true;
  if (inherit && (output.onData || output.onBytes || output.file !== undefined)) {
    throw invalid(
      'output.inherit gives the command your own stdout and stderr, so onData, onBytes and file cannot see it; drop one or the other.',
      'INVALID_OPTION',
    );
  }
  return {
    maxBytes,
    onData: output?.onData,
    onBytes: output?.onBytes,
    file: output?.file,
    inherit,
  };
}

/** The widest and tallest terminal a run may ask for, in cells. */
export const MAX_PTY_CELLS = 10_000;

/** A terminal dimension: a whole number of cells, 1 to MAX_PTY_CELLS. */
export function checkPtyCells(value: unknown, what: string): number {
  if (typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_PTY_CELLS)
    return value;
  throw invalid(`${what} must be a whole number of cells between 1 and ${MAX_PTY_CELLS}.`, 'INVALID_OPTION');
}

function normalizePty(pty: PtyOptions | undefined, env: Record<string, string>): Required<PtyOptions> {
  if (pty !== undefined && (typeof pty !== 'object' || pty === null)) {
    throw invalid('pty must be an object ({ cols, rows, term }).', 'INVALID_OPTION');
  }
  if (pty) knownFields(pty, PTY_KEYS, 'pty');
  const size = (value: unknown, what: string, fallback: number) =>
    value === undefined ? fallback : checkPtyCells(value, what);
  const term: unknown = pty?.term;
  // It becomes the command's TERM: checked as an environment value is.
  if (term !== undefined && (typeof term !== 'string' || term === '' || term.includes('\0'))) {
    throw invalid(
      `pty.term ${showValue(term)} is not a terminal type; give a name such as 'xterm-256color'.`,
      'INVALID_OPTION',
    );
  }
  return {
    cols: size(pty?.cols, 'pty.cols', 120),
    rows: size(pty?.rows, 'pty.rows', 30),
    term: term ?? env.TERM ?? 'xterm-256color',
  };
}

/**
 * An increase, never an absolute value: what protects the host is that its runs score above it,
 * whatever its own score is, and an increase is what the kernel lets any process make (lowering a
 * score below the host's needs CAP_SYS_RESOURCE), so a valid setting never needs a privilege.
 */
export function normalizeOomScoreAdj(value: unknown): OomScoreSetting | null {
  if (value === undefined) return { raise: DEFAULT_OOM_SCORE_RAISE, explicit: false };
  if (value === false) return null;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_OOM_SCORE_RAISE)
    return { raise: value, explicit: true };
  const lower =
    typeof value === 'number' && value < 0
      ? " A run's score is never set below this process's own (that needs CAP_SYS_RESOURCE)."
      : '';
  throw invalid(
    `oomScoreAdj: ${showValue(value)} is not an increase of the OOM score; give a whole number from 0 to ${MAX_OOM_SCORE_RAISE}, added to this process's own oom_score_adj (the sum capped at 1000), or false to leave the score as it is.${lower}`,
    'INVALID_OPTION',
  );
}

export function normalizeSpec(spec: RunSpec, runId: string, defaults: Partial<RunSpec> = {}): NormalSpec {
  if (typeof spec !== 'object' || spec === null)
    throw invalid('a run spec must be an object with at least argv.');
  for (const key of Object.keys(spec)) {
    if (!KNOWN_KEYS.has(key)) throw invalid(`unknown spec field ${JSON.stringify(key)}; check its spelling.`);
  }
  const merged = { ...defaults, ...stripUndefined(spec) } as RunSpec;
  // `shell: 'false'` must not run the command through a shell: a switch is true or false.
  for (const key of ['shell', 'extendEnv', 'cookie', 'replaceScope'] as const) checkSwitch(merged[key], key);
  const argv = normalizeArgv(merged);
  const mode = oneOf(merged.mode, ['child', 'pty'] as const, 'mode', 'child');

  let cwd: string | undefined;
  if (merged.cwd !== undefined) {
    if (typeof merged.cwd !== 'string' || merged.cwd === '')
      throw invalid('cwd must be a non-empty path.', 'INVALID_OPTION');
    // Before anything starts, and in every mode: a chdir that fails in the child (or in the PTY's
    // fork, or in the cgroup shim's shell) would otherwise be reported as the command's failure.
    const problem = cwdProblem(merged.cwd);
    if (problem) throw new ProcwardenError(problem.code, problem.message);
    cwd = merged.cwd;
  }

  const { env, cookie } = normalizeEnv(merged, runId);
  if (merged.signal !== undefined && !(merged.signal instanceof AbortSignal)) {
    throw invalid(
      'signal must be an AbortSignal (e.g. from new AbortController().signal).',
      'INVALID_OPTION',
    );
  }
  if (merged.scope !== undefined && typeof merged.scope !== 'string') {
    throw invalid('scope must be a string.', 'INVALID_OPTION');
  }
  // Without a scope it would replace nothing, silently.
  if (merged.replaceScope === true && merged.scope === undefined) {
    throw invalid(
      "replaceScope replaces the live runs of the run's scope, and this run has none: give it a scope too, e.g. { scope: 'dev-server', replaceScope: true }.",
      'INVALID_OPTION',
    );
  }
  const out = normalizeOutput(merged.output);
  const stdin = normalizeStdin(merged.stdin);
  if (mode === 'pty' && stdin.kind === 'inherit') {
    throw invalid(
      "stdin 'inherit' does not apply to mode 'pty': the terminal is the command's stdin; use 'pipe' and write to handle.stdin.",
      'INVALID_OPTION',
    );
  }
  const inheritFds = normalizeFds(merged.inheritFds);
  if (mode === 'pty' && inheritFds.length > 0) {
    throw invalid(
      "inheritFds does not apply to mode 'pty': a terminal is started with its own descriptors only.",
      'INVALID_OPTION',
    );
  }
  if (merged.inheritGroup !== undefined && typeof merged.inheritGroup !== 'boolean') {
    throw invalid(
      `inheritGroup must be true or false; got ${showValue(merged.inheritGroup)}.`,
      'INVALID_OPTION',
    );
  }
  if (mode === 'pty' && merged.inheritGroup === true) {
    throw invalid(
      "inheritGroup does not apply to mode 'pty': the command leads the session of its own terminal.",
      'INVALID_OPTION',
    );
  }
  const noOutputTimeoutMs = optionalDuration(merged.noOutputTimeoutMs, 'noOutputTimeoutMs', 0);
  if (out.inherit && (noOutputTimeoutMs > 0 || mode === 'pty')) {
    throw invalid(
      "output.inherit cannot be combined with noOutputTimeoutMs or mode 'pty': both need to read the command's output.",
      'INVALID_OPTION',
    );
  }
  return {
    argv,
    mode,
    cwd,
    env,
    cookie,
    stdin,
    inheritFds,
    inheritGroup: merged.inheritGroup === true,
    timeoutMs: optionalDuration(merged.timeoutMs, 'timeoutMs', 0),
    noOutputTimeoutMs,
    graceMs: optionalDuration(merged.graceMs, 'graceMs', DEFAULT_GRACE_MS),
    killSignal: normalizeSignal(merged.killSignal ?? 'SIGTERM', 'killSignal'),
    ...drainBounds(merged),
    signal: merged.signal,
    containment: oneOf(
      merged.containment,
      ['auto', 'cgroup', 'process-group', 'none'] as const,
      'containment',
      'auto',
    ),
    ...leftoversPolicy(merged, spec.holdMs !== undefined),
    scope: merged.scope,
    replaceScope: merged.replaceScope === true,
    maxBytes: out.maxBytes,
    onData: out.onData,
    onBytes: out.onBytes,
    file: out.file,
    inheritOutput: out.inherit,
    pty: normalizePty(merged.pty, env),
    oomScoreAdj: normalizeOomScoreAdj(merged.oomScoreAdj),
  };
}

function drainBounds(spec: RunSpec): { drainMs: number; drainMaxMs: number } {
  const drainMs = optionalDuration(spec.drainMs, 'drainMs', DEFAULT_DRAIN_MS);
  if (spec.drainMaxMs === undefined) return { drainMs, drainMaxMs: Math.max(drainMs, DEFAULT_DRAIN_MAX_MS) };
  const drainMaxMs = checkDuration(spec.drainMaxMs, 'drainMaxMs');
  if (drainMaxMs < drainMs) {
    throw invalid(
      `drainMaxMs (${drainMaxMs}) bounds the whole drain, so it cannot be shorter than drainMs (${drainMs}), the quiet that ends it; raise drainMaxMs or lower drainMs.`,
      'INVALID_OPTION',
    );
  }
  return { drainMs, drainMaxMs };
}

/** `ownHoldMs`: the spec gave holdMs itself (a supervisor's default one bounds only the runs that hold). */
function leftoversPolicy(
  spec: RunSpec,
  ownHoldMs: boolean,
): { leftovers: 'kill' | 'keep' | 'hold'; holdMs: number } {
  const leftovers = oneOf(spec.leftovers, ['kill', 'keep', 'hold'] as const, 'leftovers', 'kill');
  // Given with another policy it would bound nothing, silently.
  if (ownHoldMs && leftovers !== 'hold') {
    throw invalid(
      `holdMs bounds how long leftovers are held, and this run ${leftovers === 'kill' ? 'kills' : 'keeps'} them: give leftovers: 'hold' too, or leave holdMs out.`,
      'INVALID_OPTION',
    );
  }
  return { leftovers, holdMs: optionalDuration(spec.holdMs, 'holdMs', 0) };
}

function stripUndefined<T extends object>(obj: T): Partial<T> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as Partial<T>;
}
