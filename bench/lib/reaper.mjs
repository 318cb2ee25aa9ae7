import { spawn } from 'node:child_process';

// Orphans killed during a benchmark stay zombies forever on hosts whose PID 1 does not reap:
// thousands of them would fill the pid space and slow every later /proc scan. So the bench runs
// under a child subreaper (prctl PR_SET_CHILD_SUBREAPER) that reaps them. Node cannot call prctl;
// perl's syscall() can, given the prctl number of this architecture.
const PRCTL = { x64: 157, arm64: 167, arm: 172, ia32: 172 };
const MARK = 'PW_BENCH_SUBREAPER';

const REAPER = `
$SIG{INT} = 'IGNORE';
syscall($ENV{PW_PRCTL} + 0, 36, 1, 0, 0, 0) == 0 or die "prctl(PR_SET_CHILD_SUBREAPER): $!\\n";
my $child = fork() // die "fork: $!\\n";
if ($child == 0) { $SIG{INT} = 'DEFAULT'; exec { $ARGV[0] } @ARGV or die "exec: $!\\n"; }
my $status = 0;
while ((my $pid = wait()) != -1) { if ($pid == $child) { $status = $?; last } }
exit($status & 127 ? 128 + ($status & 127) : $status >> 8);
`;

/**
 * Re-runs this script under the perl subreaper unless it already is; resolves to the exit code
 * of that re-run, or to null when the current process should go on (already reaped, or no way to).
 */
export function reexecUnderSubreaper() {
  if (process.env[MARK] === '1') return Promise.resolve(null);
  const nr = PRCTL[process.arch];
  if (process.platform !== 'linux' || nr === undefined) return Promise.resolve(null);
  return new Promise((resolve) => {
    const child = spawn(
      'perl',
      ['-e', REAPER, process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      {
        stdio: 'inherit',
        env: { ...process.env, [MARK]: '1', PW_PRCTL: String(nr) },
      },
    );
    child.once('error', () => {
      console.error('bench: perl not found; running without a subreaper (killed orphans stay zombies)');
      resolve(null);
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

export const reaped = () => process.env[MARK] === '1';
