import type { LaunchPlan } from '../containment/index.js';
import type { PtyOptions } from '../types.js';
import type { PtyModule } from './pty-module.js';
import type { PtyCallbacks, PtyTerminal } from './pty-terminal.js';

/**
 * Windows ConPTY through node-pty's public API. Its output comes through a named pipe that node-pty
 * reads to the end before it reports the exit, so the output is complete at exit. There are no
 * signals: node-pty reports an exit code only.
 */
export function openConpty(
  pty: PtyModule,
  plan: LaunchPlan,
  size: Required<PtyOptions>,
  on: PtyCallbacks,
): PtyTerminal {
  const term = pty.spawn(plan.file, plan.args, {
    name: size.term,
    cols: size.cols,
    rows: size.rows,
    cwd: plan.cwd,
    env: plan.env,
    encoding: null,
  });
  let closed = false;
  let ended!: () => void;
  const outputDone = new Promise<void>((resolve) => {
    ended = resolve;
  });
  // node-pty rethrows terminal errors when nobody else listens; the exit event still follows, and
  // a terminal error must never take the host down.
  term.on?.('error', () => {});
  const resume = () => {
    if (!closed) term.resume?.();
  };
  term.onData((data) => {
    const behind = on.data(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    if (!behind || !term.pause) return;
    term.pause();
    behind.then(resume, resume);
  });
  term.onExit(({ exitCode }) => {
    closed = true;
    ended();
    on.exit(exitCode, null);
  });
  return {
    pid: term.pid,
    outputDone,
    write(data) {
      // node-pty's ConPTY input is its own socket's to buffer: nothing is counted here.
      term.write(data);
      return 0;
    },
    resize(cols, rows) {
      if (closed) return;
      try {
        term.resize(cols, rows);
      } catch {
        // The console closed under us: a size no one will read is not an error.
      }
    },
    release() {},
  };
}
