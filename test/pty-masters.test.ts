import { readdirSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunHandle, type RunSpec, Supervisor } from '../src/index.js';
import { cgroupSkipReason, sweepCgroups } from './helpers/cgroups.js';
import { LeakGuard, waitFor } from './helpers/procs.js';

// node-pty opens a PTY's master without FD_CLOEXEC, so every process forked while a PTY run is
// open used to inherit it: another run could type into that run's terminal and read its output.

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
const cgroupSkip = cgroupSkipReason();
afterEach(async () => {
  await leaks.check();
  if (!cgroupSkip) expect(await sweepCgroups()).toEqual([]);
});

/** Our descriptors that are PTY masters. */
function ourMasters(): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${name}`) === '/dev/ptmx') found.push(Number(name));
    } catch {
      // the directory's own descriptor, closed by now
    }
  }
  return found;
}

/**
 * Lists the command's own descriptors (`N target`) and types into every PTY master among them, as
 * a hostile run would. bash: its `>&$n` takes descriptors above 9.
 */
const INTRUDER = [
  'bash',
  '-c',
  'echo "pid $$"; for f in /proc/$$/fd/*; do n=$(basename "$f"); t=$(readlink "$f"); echo "fd $n $t";' +
    ' if [ "$t" = /dev/ptmx ]; then printf "typed by an intruder\\n" >&$n; fi; done',
];

/** The targets of the descriptors the intruder listed, by number. */
async function descriptorsOf(spec: RunSpec): Promise<Map<number, string>> {
  const handle = sup.spawn({ timeoutMs: 20_000, ...spec });
  leaks.track(handle.pid);
  const result = await handle.result;
  expect(result.reason).toBe('exit');
  expect(result.stdout.text).toMatch(new RegExp(`^pid ${handle.pid}\r?$`, 'm')); // the command's own pid
  const fds = new Map<number, string>();
  for (const m of result.stdout.text.matchAll(/^fd (\d+) (.*?)\r?$/gm)) fds.set(Number(m[1]), m[2] as string);
  expect(fds.size).toBeGreaterThanOrEqual(3);
  return fds;
}

/** A PTY run that waits for one line and says what it got. */
async function openVictim(): Promise<{ handle: RunHandle; output: () => string }> {
  let output = '';
  const handle = sup.spawn({
    argv: ['bash', '-c', 'echo ready; read -r x; echo "received [$x]"'],
    mode: 'pty',
    stdin: 'pipe',
    timeoutMs: 20_000,
    output: { onData: (text) => (output += text) },
  });
  leaks.track(handle.pid);
  await waitFor(() => output.includes('ready'), { what: "the PTY run's prompt" });
  expect(ourMasters().length).toBeGreaterThan(0);
  return { handle, output: () => output };
}

/** The victim gets its own line: nothing an intruder typed came before it. */
async function victimUntouched(victim: { handle: RunHandle }): Promise<void> {
  victim.handle.stdin?.write('its own line\n');
  const result = await victim.handle.result;
  expect(result.exitCode).toBe(0);
  expect(result.stdout.text).toContain('received [its own line]');
  expect(result.stdout.text).not.toContain('intruder');
}

/** Another run's terminal among `fds`: a master, or a slave beyond the command's own stdio. */
const ptmxIn = (fds: Map<number, string>) =>
  [...fds].filter(([fd, target]) => target === '/dev/ptmx' || (fd > 2 && target.startsWith('/dev/pts/')));

describe.skipIf(process.platform !== 'linux')("a PTY run's master reaches no other run", () => {
  it('a child-mode run started while a PTY run is open holds no master and cannot type into it', async () => {
    const victim = await openVictim();
    expect(ptmxIn(await descriptorsOf({ argv: INTRUDER }))).toEqual([]);
    await victimUntouched(victim);
  });

  it('a second PTY run holds no master either (it starts through a shell that closes them)', async () => {
    const victim = await openVictim();
    expect(ptmxIn(await descriptorsOf({ argv: INTRUDER, mode: 'pty' }))).toEqual([]);
    await victimUntouched(victim);
  });

  it.skipIf(cgroupSkip !== null)(
    `a cgroup-mode run holds no master (${cgroupSkip ?? 'cgroup v2 here'})`,
    async () => {
      const victim = await openVictim();
      expect(ptmxIn(await descriptorsOf({ argv: INTRUDER, containment: 'cgroup' }))).toEqual([]);
      expect(ptmxIn(await descriptorsOf({ argv: INTRUDER, containment: 'cgroup', mode: 'pty' }))).toEqual([]);
      await victimUntouched(victim);
    },
  );

  it('inheritFds naming a master passes /dev/null there, never the master', async () => {
    const victim = await openVictim();
    const masters = ourMasters();
    const fds = await descriptorsOf({ argv: INTRUDER, inheritFds: masters });
    for (const fd of masters) expect(fds.get(fd)).toBe('/dev/null');
    await victimUntouched(victim);
  });

  const ENVS: [string, Record<string, string>][] = [
    ['plain (bash alone)', { PATH: '/usr/bin:/bin', SHLVL: '2', 'A.B': '1', SPACED: 'a b  c' }],
    [
      'what bash reads or resets (bash, then env)',
      {
        PATH: '/usr/bin:/bin',
        IFS: ':',
        PPID: '7',
        OPTIND: '3',
        BASH_ENV: '/nonexistent/rc',
        SHELLOPTS: 'xtrace',
        'BASH_FUNC_exec%%': '() { echo hijacked; }',
        SHLVL: 'x',
      },
    ],
    ['without SHLVL', { PATH: '/usr/bin:/bin' }],
  ];
  it.each(ENVS)(
    'a PTY run started through the closing shell gets the same environment as one alone: %s',
    async (_, env) => {
      const seen = async () => {
        const handle = sup.spawn({
          argv: ['env'],
          mode: 'pty',
          env,
          extendEnv: false,
          timeoutMs: 20_000,
        });
        leaks.track(handle.pid);
        return (await handle.result).stdout.text
          .split('\r\n')
          .filter((line) => !line.startsWith('PROCWARDEN_RUN='))
          .sort();
      };
      const alone = await seen();
      const victim = await openVictim();
      expect(await seen()).toEqual(alone);
      for (const [name, value] of Object.entries(env)) expect(alone.join('\n')).toContain(`${name}=${value}`);
      expect(alone.some((line) => line.startsWith('SHLVL='))).toBe(env.SHLVL !== undefined);
      await victimUntouched(victim);
    },
  );
});
