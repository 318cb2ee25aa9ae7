import { mkdirSync, readFileSync, readlinkSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A run record as a supervisor writes it, for a supervisor that is dead: our own pid with a start
 * time that is not ours (override `supervisorStart` with '1' where a cgroup name must match it).
 */
export function deadRecord(runId: string, fields: Record<string, unknown>): string {
  return JSON.stringify({
    format: 'procwarden.run/1',
    supervisorId: 'pwtestdead',
    supervisorPid: process.pid,
    supervisorStart: 'not-a-start-time',
    // Written in our namespace, as every record of a supervisor that shared it.
    supervisorPidNamespace: readlinkSync('/proc/self/ns/pid'),
    runId,
    pid: null,
    pidStart: null,
    pgid: null,
    cookie: null,
    cgroupPath: null,
    startedAt: Date.now(),
    killSignal: 'SIGTERM',
    graceMs: 1000,
    command: 'test',
    ...fields,
  });
}

/** The cgroup v2 mount when this process can create cgroups right below it, or why not. */
export function writableCgroupMount(): string | { why: string } {
  const line = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((l) => l.split(' - ')[1]?.startsWith('cgroup2 '));
  const mount = line?.split(' ')[4];
  if (!mount) return { why: 'no cgroup v2 hierarchy is mounted' };
  const probe = join(mount, `pw-reap-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return mount;
  } catch (error) {
    return { why: `cannot create a cgroup under ${mount}: ${(error as NodeJS.ErrnoException).code}` };
  }
}
