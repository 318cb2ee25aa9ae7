import { execFileSync } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inForeground } from '../src/cli/foreground.js';
import { type RunHandle, type RunSpec, Supervisor } from '../src/index.js';
import { closingFirst } from '../src/spawn/pty-closer.js';
import { execRunner } from '../src/tree/index.js';
import { cgroupSkipReason, sweepCgroups } from './helpers/cgroups.js';
import { LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

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
const INTRUDER: RunSpec['argv'] = [
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
    output: {
      onData: (text) => {
        output += text;
      },
    },
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

  it('a helper procwarden runs (ps, PowerShell, taskkill) while a PTY run is open holds no master', async () => {
    const victim = await openVictim();
    const listed = await execRunner('bash', ['-c', INTRUDER[2] as string]);
    expect(listed.code).toBe(0);
    const fds = new Map<number, string>();
    for (const m of listed.stdout.matchAll(/^fd (\d+) (.*)$/gm)) fds.set(Number(m[1]), m[2] as string);
    expect(fds.size).toBeGreaterThanOrEqual(3);
    expect(ptmxIn(fds)).toEqual([]);
    await victimUntouched(victim);
  });

  it("the CLI's foreground check by ps (macOS, BSD) holds no master either", async () => {
    const victim = await openVictim();
    // A ps that lists its own descriptors, on the path macOS takes (driven here on Linux).
    const dir = leaks.trackDir(makeTmp('pw-fakeps-'));
    const listing = join(dir, 'fds');
    writeFileSync(
      join(dir, 'ps'),
      `#!/bin/bash\nfor f in /proc/$$/fd/*; do echo "fd $(basename "$f") $(readlink "$f")"; done > '${listing}'\necho ' 1 1'\n`,
    );
    chmodSync(join(dir, 'ps'), 0o755);
    const platform = Object.getOwnPropertyDescriptor(process, 'platform') as PropertyDescriptor;
    const path = process.env.PATH;
    try {
      Object.defineProperty(process, 'platform', { value: 'darwin' });
      process.env.PATH = `${dir}:${path}`;
      expect(inForeground()).toBe(true);
    } finally {
      Object.defineProperty(process, 'platform', platform);
      process.env.PATH = path;
    }
    const fds = new Map<number, string>();
    for (const m of readFileSync(listing, 'utf8').matchAll(/^fd (\d+) (.*)$/gm))
      fds.set(Number(m[1]), m[2] as string);
    expect(fds.size).toBeGreaterThanOrEqual(3);
    expect(ptmxIn(fds)).toEqual([]);
    await victimUntouched(victim);
  });

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

/**
 * bash(1)'s "Shell Variables", written out here apart from src/spawn/bash-variables.ts so that the
 * test does not take the code's word for which names matter, plus every variable a bash here
 * defines of its own (`compgen -v`).
 */
const BASH_DOCUMENTS =
  '_ BASH BASHOPTS BASHPID BASH_ALIASES BASH_ARGC BASH_ARGV BASH_ARGV0 BASH_CMDS BASH_COMMAND ' +
  'BASH_EXECUTION_STRING BASH_LINENO BASH_LOADABLES_PATH BASH_REMATCH BASH_SOURCE BASH_SUBSHELL ' +
  'BASH_VERSINFO BASH_VERSION COMP_CWORD COMP_KEY COMP_LINE COMP_POINT COMP_TYPE COMP_WORDBREAKS ' +
  'COMP_WORDS COPROC DIRSTACK EPOCHREALTIME EPOCHSECONDS EUID FUNCNAME GROUPS HISTCMD HOSTNAME ' +
  'HOSTTYPE LINENO MACHTYPE MAPFILE OLDPWD OPTARG OPTIND OSTYPE PIPESTATUS PPID PWD RANDOM ' +
  'READLINE_ARGUMENT READLINE_LINE READLINE_MARK READLINE_POINT REPLY SECONDS SHELLOPTS SHLVL SRANDOM ' +
  'UID BASH_COMPAT BASH_ENV BASH_XTRACEFD CDPATH CHILD_MAX COLUMNS COMPREPLY EMACS ENV EXECIGNORE ' +
  'FCEDIT FIGNORE FUNCNEST GLOBIGNORE HISTCONTROL HISTFILE HISTFILESIZE HISTIGNORE HISTSIZE ' +
  'HISTTIMEFORMAT HOME HOSTFILE IFS IGNOREEOF INPUTRC INSIDE_EMACS LANG LANGUAGE LC_ALL LC_COLLATE ' +
  'LC_CTYPE LC_MESSAGES LC_NUMERIC LC_TIME LINES MAIL MAILCHECK MAILPATH OPTERR PATH POSIXLY_CORRECT ' +
  'PROMPT_COMMAND PROMPT_DIRTRIM PS0 PS1 PS2 PS3 PS4 SHELL TERM TIMEFORMAT TMOUT TMPDIR auto_resume histchars';

function bashVariableNames(): string[] {
  const own = execFileSync('/bin/bash', ['-c', 'compgen -v'], { env: {}, encoding: 'utf8' }).split('\n');
  return [...new Set([...BASH_DOCUMENTS.split(' '), ...own])].filter((name) => name !== '');
}

const CONTAINMENTS =
  cgroupSkip === null ? (['process-group', 'cgroup'] as const) : (['process-group'] as const);

const PRINT_ENV: RunSpec['argv'] = [
  '/usr/bin/python3',
  '-c',
  'import os,json;print(json.dumps(dict(os.environ)))',
];

/** What a PTY run printed: its environment (without the run's cookie) and any other line. */
async function ptyRun(
  spec: Omit<RunSpec, 'mode'>,
): Promise<{ env: Record<string, string> | null; other: string[]; text: string }> {
  const handle = sup.spawn({ timeoutMs: 20_000, ...spec, mode: 'pty' });
  leaks.track(handle.pid);
  const text = (await handle.result).stdout.text;
  let env: Record<string, string> | null = null;
  const other: string[] = [];
  for (const line of text.split('\r\n')) {
    if (line.startsWith('{')) env = JSON.parse(line) as Record<string, string>;
    else if (line !== '') other.push(line);
  }
  if (env !== null) delete env.PROCWARDEN_RUN;
  return { env, other, text: env === null ? text : '(the environment)' };
}

/**
 * Each spec run alone, then again while another PTY run is open (through the closing shell), in each
 * containment: under cgroup the closing shell starts the cgroup shim, not the command.
 */
async function aloneThenClosing(given: Omit<RunSpec, 'mode'>[]) {
  const specs = CONTAINMENTS.flatMap((containment) => given.map((spec) => ({ ...spec, containment })));
  const alone: Awaited<ReturnType<typeof ptyRun>>[] = [];
  for (const spec of specs) alone.push(await ptyRun(spec));
  const victim = await openVictim();
  const closing: typeof alone = [];
  for (const spec of specs) closing.push(await ptyRun(spec));
  await victimUntouched(victim);
  return specs.map((spec, i) => ({ spec, alone: alone[i], closing: closing[i] }));
}

describe.skipIf(process.platform !== 'linux')(
  'a PTY run started through the closing shell is the run alone',
  () => {
    it("puts only bash's variables on a command line, which other users can read (no processes)", () => {
      const env = { PATH: '/usr/bin:/bin', API_TOKEN: 'secret-value', 'A.B': '1', RANDOM: '5', LC_ALL: 'C' };
      const plan = closingFirst({ file: 'a=b', args: ['x'], cwd: undefined, env, newSession: true }, [18]);
      expect(plan?.env).toEqual({ API_TOKEN: 'secret-value', 'A.B': '1' });
      const args = plan?.args ?? [];
      expect(args.join('\n')).not.toContain('secret-value');
      expect(args.slice(-8)).toEqual(['RANDOM=5', 'LC_ALL=C', '/usr/bin/nice', '-n', '0', '--', 'a=b', 'x']);
      expect(args).toContain('SHLVL'); // unset (-u): bash exports one of its own
    });

    it("gets bash's dynamic and special variables as the run has them", async () => {
      const common = {
        PATH: '/usr/bin:/bin',
        SHLVL: '1',
        RANDOM: '5',
        SRANDOM: '6',
        BASHPID: '8',
        BASH_ARGV0: 'zero',
        HISTCMD: '9',
        EPOCHSECONDS: '1',
        PS4: '+',
        LINENO: '7',
      };
      const specs = ['/nonexistent', 'rel'].map((OLDPWD) => ({
        argv: PRINT_ENV,
        env: { ...common, OLDPWD },
        extendEnv: false,
      }));
      for (const { spec, alone, closing } of await aloneThenClosing(specs)) {
        expect(alone?.env).toMatchObject(spec.env ?? {});
        expect({ in: spec.containment, ...closing }).toEqual({ in: spec.containment, ...alone });
      }
    });

    it('gets every variable bash documents or defines, set to odd values, as the run has them', async () => {
      const names = bashVariableNames();
      expect(names.length).toBeGreaterThan(100);
      const odd = ['we ird', '7', '/nonexistent', '+', 'rel', '() { echo hijacked; }', ''];
      const specs = odd.map((value) => ({
        argv: PRINT_ENV,
        env: {
          ...Object.fromEntries(names.map((name) => [name, value])),
          'BASH_FUNC_exec%%': '() { echo hijacked; }',
        },
        extendEnv: false,
      }));
      for (const { spec, alone, closing } of await aloneThenClosing(specs)) {
        const label = `${spec.containment}, ${spec.env?.PATH}: ${alone?.text}`;
        expect(alone?.env, label).not.toBeNull();
        expect({ label, ...closing }).toEqual({ label, ...alone });
      }
    });

    it("writes nothing of bash's into the run's terminal (a locale that is not installed)", async () => {
      const spec: Omit<RunSpec, 'mode'> = { argv: ['/bin/echo', 'hi'], env: { LC_ALL: 'xx_YY.UTF-8' } };
      for (const { alone, closing } of await aloneThenClosing([spec])) {
        expect(alone?.text).toBe('hi\r\n');
        expect(closing?.text).toBe('hi\r\n');
      }
    });

    it('runs the program the direct path runs: a file without #! by /bin/sh, also without PATH', async () => {
      const dir = makeTmp('pw-closer-');
      try {
        const file = join(dir, 'no-interpreter');
        writeFileSync(file, 'echo "bash [$BASH_VERSION]"\n');
        chmodSync(file, 0o755);
        const specs = [{ PATH: '/usr/bin:/bin', SHLVL: '1' }, { SHLVL: '1' }].map(
          (env): Omit<RunSpec, 'mode'> => ({
            argv: [file],
            env,
            extendEnv: false,
          }),
        );
        for (const { alone, closing } of await aloneThenClosing(specs)) {
          expect(alone?.text).toBe('bash []\r\n'); // execvp ran it with /bin/sh (dash here)
          expect(closing?.text).toBe(alone?.text);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("a command whose name has '=' holds no master either, by path or found in PATH", async () => {
      const dir = makeTmp('pw-closer-');
      try {
        const file = join(dir, 'a=b');
        writeFileSync(file, `#!/bin/bash\n${INTRUDER[2]}\n`);
        chmodSync(file, 0o755);
        const victim = await openVictim();
        // No SHLVL, as under cron or systemd: the closing shell needs env(1) to leave it unset.
        const env = { PATH: `${dir}:/usr/bin:/bin` };
        for (const containment of CONTAINMENTS)
          for (const argv of [[file], ['a=b']] as const) {
            const fds = await descriptorsOf({ argv, mode: 'pty', env, extendEnv: false, containment });
            expect({ containment, argv, others: ptmxIn(fds) }).toEqual({ containment, argv, others: [] });
          }
        await victimUntouched(victim);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
);
