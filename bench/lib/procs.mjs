import { readdirSync, readFileSync } from 'node:fs';

/** One /proc/PID/stat, reduced to what the harness needs; null when the pid does not exist. */
export function stat(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid, state: f[0], ppid: Number(f[1]), pgid: Number(f[2]), start: f[19] };
}

/** Gone means: no such process, a zombie (PID 1 may never reap it), or another process on that pid. */
export function isGone(member) {
  const s = stat(member.pid);
  return !s || s.state === 'Z' || s.state === 'X' || s.start !== member.start;
}

export function snapshot() {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    const code = entry.charCodeAt(0);
    if (code < 48 || code > 57) continue;
    const s = stat(Number(entry));
    if (s && s.state !== 'Z' && s.state !== 'X') out.push(s);
  }
  return out;
}

/** `root` and every live descendant by parent link, from one snapshot. */
export function treeOf(root) {
  const all = snapshot();
  const children = new Map();
  for (const p of all) {
    const list = children.get(p.ppid);
    if (list) list.push(p);
    else children.set(p.ppid, [p]);
  }
  const self = all.find((p) => p.pid === root);
  if (!self) return [];
  const out = [self];
  for (let i = 0; i < out.length; i++) for (const c of children.get(out[i].pid) ?? []) out.push(c);
  return out;
}

export const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The one extinction check every contender gets: walks the member list, re-reading each entry
 * until it is gone, sleeping 1 ms whenever one is still alive. Members already seen gone stay gone
 * (identity includes the start time), so each poll only reads what is left.
 */
export async function waitExtinct(members, timeoutMs = 60_000) {
  const until = performance.now() + timeoutMs;
  let i = 0;
  while (i < members.length) {
    if (isGone(members[i])) {
      i++;
      continue;
    }
    if (performance.now() > until) {
      throw new Error(`${members.length - i} of ${members.length} members still alive after ${timeoutMs} ms`);
    }
    await delay(1);
  }
}

/** SIGKILLs each member that is still the same process; returns how many were alive. */
export function killSurvivors(members) {
  let alive = 0;
  for (const m of members) {
    if (isGone(m)) continue;
    alive++;
    try {
      process.kill(m.pid, 'SIGKILL');
    } catch {
      // exited between the check and the kill
    }
  }
  return alive;
}
