import { isGone, type ProcessInfo, platformTable, refuseBlind } from '../tree/index.js';
import { parseOptions, parsePid, UsageError } from './args.js';
import { EXIT_FAILURE, EXIT_USAGE } from './exit-codes.js';
import { formatAge, printable } from './format.js';
import { TREE_HELP } from './help.js';
import { platformDetails } from './proc-details.js';
import { writeNow } from './write-now.js';

const OPTIONS = { help: { type: 'boolean', short: 'h' } } as const;

interface Row {
  info: ProcessInfo;
  depth: number;
}

/** Depth-first order under each root, children by pid. */
function walk(roots: ProcessInfo[], children: Map<number, ProcessInfo[]>, seen: Set<number>): Row[] {
  const rows: Row[] = [];
  const visit = (p: ProcessInfo, depth: number) => {
    if (seen.has(p.pid)) return;
    seen.add(p.pid);
    rows.push({ info: p, depth });
    for (const c of children.get(p.pid) ?? []) visit(c, depth + 1);
  };
  for (const r of roots) visit(r, 0);
  return rows;
}

export async function treeCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseOptions(args, OPTIONS, EXIT_USAGE);
  if (values.help) {
    writeNow(1, TREE_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError('give at most one PID', EXIT_USAGE);
  const pidText = positionals[0];
  if (pidText !== undefined) parsePid(pidText, EXIT_USAGE);

  const table = platformTable();
  // A blind table lists nothing: an empty tree, or "no process has pid N", would be false.
  refuseBlind(table, 'show the process tree', false);
  const list = (await table.list()).sort((a, b) => a.pid - b.pid);
  const details = platformDetails();
  const byPid = new Map(list.map((p) => [p.pid, p]));
  const children = new Map<number, ProcessInfo[]>();
  for (const p of list) {
    if (p.ppid === p.pid || !byPid.has(p.ppid)) continue;
    const siblings = children.get(p.ppid);
    if (siblings) siblings.push(p);
    else children.set(p.ppid, [p]);
  }
  const cookies = new Map<number, string>();
  for (const p of list) {
    const cookie = details.runCookie(p.pid);
    if (cookie) cookies.set(p.pid, cookie);
  }

  let rows: Row[];
  let escaped: Row[] = [];
  const seen = new Set<number>();
  if (pidText === undefined) {
    rows = walk(
      list.filter((p) => !byPid.has(p.ppid) || p.ppid === p.pid),
      children,
      seen,
    );
  } else {
    // A thread's id stands for its process, as with `kill` (and kill(1)).
    const root = byPid.get(table.processOf?.(Number(pidText)) ?? Number(pidText));
    if (!root) {
      process.stderr.write(`procwarden tree: no process has pid ${pidText}\n`);
      return EXIT_FAILURE;
    }
    rows = walk([root], children, seen);
    // Members of the same runs that left their run's tree (setsid + double fork re-parent them
    // away): a holder of the cookie whose parent holds none. The run's own processes above PID, and
    // their other children, have a parent in the run: they are the run, not escapees.
    const runs = new Set(rows.map((r) => cookies.get(r.info.pid)).filter((c) => c !== undefined));
    const above = new Set<number>();
    for (let p = byPid.get(root.ppid); p && !above.has(p.pid); p = byPid.get(p.ppid)) above.add(p.pid);
    const strayRoots = list.filter((p) => {
      const cookie = cookies.get(p.pid);
      return (
        cookie !== undefined &&
        runs.has(cookie) &&
        !seen.has(p.pid) &&
        !above.has(p.pid) &&
        cookies.get(p.ppid) !== cookie
      );
    });
    escaped = walk(strayRoots, children, seen);
  }

  const now = Date.now();
  const line = ({ info: p, depth }: Row) => {
    const started = details.startedAt(p);
    const marks = [p.pid === p.sid ? 'S' : '', p.pid === p.pgid ? 'G' : ''].join('');
    const cookie = cookies.get(p.pid);
    const command = printable(details.commandLine(p.pid) ?? `[${p.command}]`);
    return [
      String(p.pid).padStart(7),
      String(p.pgid).padStart(7),
      String(p.sid).padStart(7),
      ` ${p.state}`,
      (started === null ? '?' : formatAge(now - started)).padStart(6),
      ` ${marks.padEnd(2)}`,
      ` ${'  '.repeat(depth)}${command}${cookie ? `  run=${printable(cookie)}` : ''}${isGone(p) ? '  (zombie)' : ''}`,
    ].join(' ');
  };
  const header = `${'PID'.padStart(7)} ${'PGID'.padStart(7)} ${'SID'.padStart(7)}  S ${'AGE'.padStart(6)}  LD  COMMAND`;
  const out = [header, ...rows.map(line)];
  if (escaped.length > 0) {
    out.push('', 'escaped from this tree, same procwarden run:', ...escaped.map(line));
  }
  // At a terminal, one process per line (as ps does); piped, whole command lines.
  const width = process.stdout.isTTY ? process.stdout.columns : 0;
  const fit = (l: string) => (width > 0 && l.length > width ? `${l.slice(0, width - 1)}…` : l);
  writeNow(1, `${out.map(fit).join('\n')}\n`);
  return 0;
}
