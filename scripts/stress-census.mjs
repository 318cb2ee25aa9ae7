// What a stress run leaves behind: processes carrying a run cookie and procwarden cgroups.
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const COOKIE = Buffer.from('PROCWARDEN_RUN=');

function stat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return {
      state: rest[0],
      ppid: Number(rest[1]),
      start: Number(rest[19]),
      command: text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')),
    };
  } catch {
    return null;
  }
}

/** Live processes (zombies count as gone) whose environment holds a run cookie, as `pid@start`. */
export function cookieHolders(ignoreCookie) {
  const out = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let env;
    try {
      env = readFileSync(`/proc/${entry}/environ`);
    } catch {
      continue;
    }
    const value = cookieValue(env);
    if (value === null || value === ignoreCookie) continue;
    const info = stat(entry);
    if (info && info.state !== 'Z' && info.state !== 'X') out.set(`${entry}@${info.start}`, info);
  }
  return out;
}

function cookieValue(env) {
  for (let at = env.indexOf(COOKIE); at >= 0; at = env.indexOf(COOKIE, at + 1)) {
    if (at > 0 && env[at - 1] !== 0) continue;
    const end = env.indexOf(0, at);
    return env.subarray(at + COOKIE.length, end < 0 ? env.length : end).toString('utf8');
  }
  return null;
}

/**
 * Whether a process descends only from processes started since `tick` (then pid 1): a tree left by
 * the stress run is orphaned that way once its test process is gone, while a run of someone else
 * still in progress hangs below an older process (their shell, their test runner).
 */
export function orphanedSince(pid, tick) {
  for (let p = pid, hops = 0; p > 1 && hops < 1000; hops++) {
    const info = stat(p);
    if (!info || info.start < tick) return false;
    p = info.ppid;
  }
  return true;
}

/** The cgroup v2 directory of this process, or null without a (writable) cgroup v2. */
export function ownCgroup() {
  try {
    const mount = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .find((l) => l.split(' - ')[1]?.startsWith('cgroup2 '))
      ?.split(' ')[4];
    const own = readFileSync('/proc/self/cgroup', 'utf8').match(/^0::(.*)$/m)?.[1];
    if (!mount || own === undefined) return null;
    return join(mount, own);
  } catch {
    return null;
  }
}

/**
 * A cgroup of its own for the suite, so that what the suite leaves is told apart from what other
 * people's runs on the machine make: every process and cgroup the tests create lands under it.
 */
export function makeStressCgroup() {
  const own = ownCgroup();
  if (!own || process.getuid?.() !== 0) return null;
  const dir = join(own, `pw-stress-${process.pid}`);
  try {
    mkdirSync(dir);
    return dir;
  } catch {
    return null;
  }
}

/** Every cgroup directory below `dir` (deepest first), `dir` itself last. */
export function subtree(dir) {
  let subs = [];
  try {
    subs = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory());
  } catch {
    return [];
  }
  return [...subs.flatMap((d) => subtree(join(dir, d.name))), dir];
}

/** Pids in a cgroup subtree. */
export function cgroupPids(dir) {
  const out = [];
  for (const d of subtree(dir)) {
    try {
      for (const line of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n'))
        if (line) out.push(Number(line));
    } catch {
      // removed meanwhile
    }
  }
  return out.filter((pid) => {
    const info = stat(pid);
    return info && info.state !== 'Z' && info.state !== 'X';
  });
}

/** The per-supervisor procwarden-<pid>-<start> cgroups in a subtree (their run cgroups go with them). */
export function procwardenCgroups(dir) {
  return subtree(dir).filter((d) => /\/procwarden-\d+-\d+$/.test(d.slice(dir.length)));
}

/**
 * Empties (cgroup.kill: everything in it was started by this stress run) and removes a subtree.
 * Synchronous, so that a signal handler can use it too.
 */
export function removeCgroup(dir) {
  const dirs = subtree(dir);
  for (const d of dirs) {
    try {
      writeFileSync(join(d, 'cgroup.kill'), '1');
    } catch {
      // gone, or an older kernel without cgroup.kill
    }
  }
  const pause = new Int32Array(new SharedArrayBuffer(4));
  // Until no task is left: killed tasks still exiting are no longer listed in cgroup.procs, yet
  // keep the cgroup populated (rmdir would fail with EBUSY).
  const populated = () => {
    try {
      return /^populated 1$/m.test(readFileSync(join(dir, 'cgroup.events'), 'utf8'));
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 200 && (cgroupPids(dir).length > 0 || populated()); i++) Atomics.wait(pause, 0, 0, 10);
  const failed = [];
  for (const d of dirs) {
    try {
      rmdirSync(d);
    } catch (error) {
      if (error.code !== 'ENOENT') failed.push(`${d}: ${error.code}`);
    }
  }
  return failed;
}
