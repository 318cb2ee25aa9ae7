/**
 * `procwarden/tree-kill`: a drop-in for the tree-kill package (same call, same callback), ending the
 * tree with procwarden's sequence instead of one signal per pid found by `ps`: the signal to every
 * member at once, a grace (5 s), SIGKILL to the survivors, identity checked before each signal, and
 * PID ≤ 1, this process and its ancestors refused. The callback runs once the tree is extinct.
 */
import { ProcwardenError } from './errors.js';
import { signalTree, terminateTree } from './kill/index.js';
import { normalizeSignal } from './options/index.js';
import { MAX_PID } from './tree/index.js';

/**
 * The signals that ask a process to end, for which the tree is ended: the signal, the grace,
 * SIGKILL for the survivors. Any other is delivered once to every member, as tree-kill does: a
 * SIGUSR2 or SIGHUP that makes a daemon reload, a SIGSTOP, a SIGCONT must not end the tree.
 */
const ENDING = new Set<NodeJS.Signals>(['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGKILL']);

export type TreeKillCallback = (error?: Error) => void;

export function treeKill(pid: number, callback?: TreeKillCallback): void;
export function treeKill(pid: number, signal?: string | number, callback?: TreeKillCallback): void;
export function treeKill(
  pidArg: number,
  signalArg?: string | number | TreeKillCallback,
  callbackArg?: TreeKillCallback,
): unknown {
  let signal = signalArg;
  let callback = callbackArg;
  if (typeof signal === 'function' && callback === undefined) {
    callback = signal;
    signal = undefined;
  }
  // tree-kill tests `if (callback)`: null, false, 0 or '' in its place is no callback there either.
  if (!callback) callback = undefined;
  else if (typeof callback !== 'function') {
    throw new ProcwardenError('INVALID_OPTION', 'the tree-kill callback must be a function, or left out.');
  }
  // What tree-kill does with its argument, so that '1234' and 1234.0 keep working: parseInt without
  // a radix, which also reads '0x1f' as hexadecimal (and '010' as 10).
  const text = String(pidArg);
  const parsed = Number.parseInt(text, /^\s*[-+]?0x/i.test(text) ? 16 : 10);
  if (Number.isNaN(parsed)) {
    // As tree-kill (NaN and Infinity included): the callback is called at once, before treeKill
    // returns, and what it returns is returned; thrown without one.
    const error = new Error('pid must be a number');
    if (!callback) throw error;
    return callback(error);
  }
  // A number whose text is no integer (1e21, 1e-7) parses as another pid (1): refused below.
  const pid = typeof pidArg === 'number' && /e/i.test(String(pidArg)) ? Number.NaN : parsed;
  let name: NodeJS.Signals | 0;
  try {
    if (Number.isNaN(pid)) {
      throw new ProcwardenError(
        'INVALID_PID',
        `pid ${pidArg} is not a valid process id; give a whole number from 1 to ${MAX_PID}.`,
      );
    }
    // Node's process.kill reads a falsy signal as SIGTERM and 0 as "does it exist?"; so does this.
    name = signal === 0 ? 0 : normalizeSignal(signal || 'SIGTERM', 'tree-kill signal');
    refuseAtOnce(pid);
    notPermitted(pid);
  } catch (error) {
    // Like tree-kill: reported to the callback when there is one, thrown otherwise.
    if (!callback) throw error;
    const report = callback;
    process.nextTick(() => report(error as Error));
    return;
  }
  const done = (error?: Error) => {
    if (!callback) return;
    const call = callback;
    // tree-kill calls back with no argument when all went well.
    process.nextTick(() => (error ? call(error) : call()));
  };
  if (name === 0) {
    done();
    return;
  }
  const work = ENDING.has(name)
    ? terminateTree(pid, { signal: name }).then((report) => ({ failed: report.escaped, notes: report.notes }))
    : signalTree(pid, name).then((report) => ({ failed: report.refused, notes: report.notes }));
  work.then(
    ({ failed, notes }) => {
      // A member that could not be ended or signalled (EPERM, say): tree-kill reports those too.
      done(failed > 0 ? unreached(pid, failed, notes) : undefined);
    },
    (error: unknown) => {
      // Without a callback nobody can be told; tree-kill would crash the host here, procwarden
      // never does (an ancestor refused, say, is known only once the table was read).
      // tree-kill calls back without an error when the pid is already gone: the tree is extinct.
      const gone = error instanceof ProcwardenError && error.code === 'NO_SUCH_PROCESS';
      done(gone ? undefined : (error as Error));
    },
  );
}

/**
 * The refusals that need no process table, checked before anything is started, so that a caller
 * without a callback gets them thrown. tree-kill would signal a process group for 0 or a negative
 * pid; procwarden never does.
 */
function refuseAtOnce(pid: number): void {
  if (pid <= 0 || pid > MAX_PID) {
    throw new ProcwardenError(
      'INVALID_PID',
      pid <= 0
        ? `pid ${pid} is not a process id (tree-kill would have signalled a process group); give a positive integer.`
        : `pid ${pid} is not a process id; no platform has one above ${MAX_PID}.`,
    );
  }
  if (pid === 1 || pid === process.pid) {
    throw new ProcwardenError(
      'FORBIDDEN_TARGET',
      `refusing to terminate pid ${pid}: it is PID 1 or this process.`,
    );
  }
}

/**
 * A root we may not signal fails at once with Node's own error (EPERM, with its `syscall`), as
 * tree-kill's first process.kill does, before anything is sent: the sequence would retry SIGKILL
 * on it for its whole bound first.
 */
function notPermitted(pid: number): void {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EPERM') throw error;
  }
}

/**
 * The error for members that could not be reached: each distinct note once (a SIGKILL retried for
 * its whole bound fails the same way each time), and `code` 'EPERM' where that was why, as the
 * error of tree-kill's process.kill has.
 */
function unreached(pid: number, count: number, notes: readonly string[]): Error {
  const distinct = [...new Set(notes)];
  const error = new Error(
    `${count} process(es) of the tree of pid ${pid} could not be ended: ${distinct.join('; ')}`,
  ) as NodeJS.ErrnoException;
  if (distinct.some((n) => n.includes('EPERM') || n.includes('not permitted'))) error.code = 'EPERM';
  return error;
}

export default treeKill;
// `require('procwarden/tree-kill')` is then the function itself, as `require('tree-kill')` is: Node
// 20.19+, 22.12+ and 24 load an ES module from require() and return this export when it exists.
// Left out of the types (stripInternal): a string as an export name is TypeScript 5.6+ syntax, and
// with it in dist/tree-kill.d.ts every ES module resolution on TS 5.5 and older failed to parse.
/** @internal */
export { treeKill as 'module.exports' };
