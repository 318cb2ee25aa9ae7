/**
 * `procwarden/tree-kill`: a drop-in for the tree-kill package (same call, same callback), ending the
 * tree with procwarden's sequence instead of one signal per pid found by `ps`: the signal to every
 * member at once, a grace (5 s), SIGKILL to the survivors, identity checked before each signal, and
 * PID ≤ 1, this process and its ancestors refused. The callback runs once the tree is extinct.
 */
import { ProcwardenError } from './errors.js';
import { terminateTree } from './kill/index.js';
import { normalizeSignal } from './options/index.js';

export type TreeKillCallback = (error?: Error) => void;

export function treeKill(pid: number, callback?: TreeKillCallback): void;
export function treeKill(pid: number, signal?: string | number, callback?: TreeKillCallback): void;
export function treeKill(
  pidArg: number,
  signalArg?: string | number | TreeKillCallback,
  callbackArg?: TreeKillCallback,
): void {
  let signal = signalArg;
  let callback = callbackArg;
  if (typeof signal === 'function' && callback === undefined) {
    callback = signal;
    signal = undefined;
  }
  // What tree-kill does with its argument, so that '1234' and 1234.0 keep working.
  const pid = Number.parseInt(String(pidArg), 10);
  let name: NodeJS.Signals;
  try {
    if (Number.isNaN(pid)) throw new Error('pid must be a number');
    name = normalizeSignal(signal ?? 'SIGTERM', 'tree-kill signal');
    refuseAtOnce(pid);
  } catch (error) {
    // Like tree-kill: reported to the callback when there is one, thrown otherwise.
    if (!callback) throw error;
    const report = callback;
    process.nextTick(() => report(error as Error));
    return;
  }
  terminateTree(pid, { signal: name }).then(
    (report) => {
      // An escapee is a member that could not be ended (EPERM, say): tree-kill reports those too.
      const error =
        report.escaped > 0
          ? new Error(
              `${report.escaped} process(es) of the tree of pid ${pid} could not be ended: ${report.notes.join('; ')}`,
            )
          : undefined;
      if (callback) process.nextTick(callback, error);
    },
    (error: unknown) => {
      // Without a callback nobody can be told; tree-kill would crash the host here, procwarden
      // never does (an ancestor refused, say, is known only once the table was read).
      // tree-kill calls back without an error when the pid is already gone: the tree is extinct.
      const gone = error instanceof ProcwardenError && error.code === 'NO_SUCH_PROCESS';
      if (callback) process.nextTick(callback, gone ? undefined : (error as Error));
    },
  );
}

/**
 * The refusals that need no process table, checked before anything is started, so that a caller
 * without a callback gets them thrown. tree-kill would signal a process group for 0 or a negative
 * pid; procwarden never does.
 */
function refuseAtOnce(pid: number): void {
  if (pid <= 1 || pid === process.pid) {
    throw new ProcwardenError(
      pid <= 0 ? 'INVALID_PID' : 'FORBIDDEN_TARGET',
      pid <= 0
        ? `pid ${pid} is not a process id (tree-kill would have signalled a process group); give a positive integer.`
        : `refusing to terminate pid ${pid}: it is PID 1 or this process.`,
    );
  }
}

export default treeKill;
// `require('procwarden/tree-kill')` is then the function itself, as `require('tree-kill')` is: Node
// 20.19+, 22.12+ and 24 load an ES module from require() and return this export when it exists.
export { treeKill as 'module.exports' };
