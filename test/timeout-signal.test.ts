import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { timeoutSignal } from '../src/cli/timeout-signal.js';
import { runCli } from './helpers/cli.js';
import { LeakGuard } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const COREUTILS = '/usr/bin/timeout';
const skip = !existsSync(COREUTILS)
  ? `${COREUTILS} is not installed: nothing to compare with`
  : process.platform !== 'linux'
    ? 'the real-time signal numbers compared are Linux (glibc) ones'
    : null;

/** GNU's own run; sync: each is a few ms, and awaited before the next. */
function gnu(args: string[]) {
  const r = spawnSync(COREUTILS, args, {
    env: { ...process.env, LC_ALL: 'C' },
    encoding: 'utf8',
    timeout: 10_000,
  });
  return { status: r.status, stderr: r.stderr };
}

/** The signal GNU sends for -s `text` as its -v line names it ('EXIT' for 0), or null if it refuses it. */
function gnuSends(text: string): string | null {
  // -k: a signal the command ignores or that stops it must not keep the comparison waiting.
  const r = gnu(['-v', '-k', '0.05', '-s', text, '0.001', 'sleep', '10']);
  if (r.status === 125) return null;
  return /sending signal (\S+) to command/.exec(r.stderr)?.[1] ?? `no -v line: ${r.stderr}`;
}

/** Ours, named as our -v line names it. */
function oursSends(text: string): string | null {
  const sig = timeoutSignal(text);
  if (sig === null) return null;
  if (sig === 0) return 'EXIT';
  const name = sig.replace(/^SIG/, '');
  return ({ IOT: 'ABRT', IO: 'POLL' } as Record<string, string>)[name] ?? name;
}

const CAREFUL = [
  ...['0', '1', '9', '31', '32', '33', '34', '64', '65', '127', '128', '129', '137', '191', '192'],
  ...['255', '256', '300', '383', '511', '512', '1000', '2147483647', '2147483648', '4294967305'],
  ...['-1', '-9', '1e3', '0x9', ' 9', '+9', '9 ', '09', '0009', '', '9x'],
  ...[
    'TERM',
    'sigterm',
    'SIGSIGTERM',
    'ſigterm',
    'EXIT',
    'sigexit',
    'CLD',
    'IOT',
    'POLL',
    'STKFLT',
    'UNUSED',
    'SIG',
  ],
  ...['RTMIN', 'rtmax', 'SIGRTMIN+2', 'RTMIN1', 'RTMIN 1', 'RTMIN+ 1', 'RTMIN+1 ', 'RTMIN-1', 'RTMAX+1'],
  ...['RTMAX+0', 'rtmin-0', 'RTMIN+030', 'RTMIN+31', 'RTMAX-30', 'RTMAX-31', 'RTMIN16', 'RTMAX-16'],
  // A number after SIG is read as it is, unmasked, up to SIGRTMAX.
  ...['SIG15', 'sig015', 'SIG0', 'SIG44', 'SIG64', 'SIG32', 'SIG65', 'SIG137', 'SIG300', 'SIG+9', 'SIG 9'],
];

describe.skipIf(skip !== null)(
  `timeout -s: the operands GNU timeout takes${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    it('0..300: accepted or refused as GNU accepts or refuses it', () => {
      const numbers = Array.from({ length: 301 }, (_, n) => String(n));
      const theirs = numbers.map((n) => [n, gnu(['-s', n, '0', 'true']).status === 0]);
      expect(numbers.map((n) => [n, timeoutSignal(n) !== null])).toEqual(theirs);
    });

    it('a careful selection: the same signal as GNU sends, named as its -v line names it', () => {
      const theirs = CAREFUL.map((text) => [text, gnuSends(text)]);
      expect(CAREFUL.map((text) => [text, oursSends(text)])).toEqual(theirs);
    });

    it('through the CLI: -s 128, 256 and 300 are taken, and 300 is the real-time signal GNU sends', async () => {
      for (const n of ['128', '256', '300']) {
        const ours = await runCli(['timeout', '-s', n, '1', 'true']);
        leaks.track(ours.pid);
        expect({ n, status: ours.status, stderr: ours.stderr }).toEqual({
          n,
          ...gnu(['-s', n, '1', 'true']),
        });
      }
      // The command says which signal reached it: RTMIN+10, 300 & 0xFF (44). Its trap set, it fires
      // its timeout's timer itself (SIGALRM to a timeout is the timer running out): under load a
      // 0.3 s timer ran out before bash had set the trap, under GNU's timeout as under ours.
      const script = 'trap "echo got RTMIN+10; exit 7" RTMIN+10; kill -ALRM $PPID; sleep 10 & wait';
      const args = ['-s', '300', '30', 'bash', '-c', script];
      const ours = await runCli(['timeout', ...args]);
      leaks.track(ours.pid);
      const theirs = spawnSync(COREUTILS, args, { encoding: 'utf8', timeout: 10_000 });
      expect({ status: ours.status, stdout: ours.stdout.toString() }).toEqual({
        status: theirs.status,
        stdout: theirs.stdout,
      });
      expect(theirs.stdout).toBe('got RTMIN+10\n');
    });
  },
);
