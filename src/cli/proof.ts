import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isProcwardenError } from '../errors.js';
import { Supervisor } from '../supervisor/index.js';
import { platformTable } from '../tree/index.js';
import { parseOptions, UsageError } from './args.js';
import { painter, useColour } from './colour.js';
import { EXIT_FAILURE, EXIT_USAGE } from './exit-codes.js';
import { formatMs } from './format.js';
import { PROOF_HELP } from './help.js';
import { CASES, type CaseProof, proveCase } from './proof-cases.js';
import { writeProofScripts } from './proof-fixtures.js';
import { writeNow } from './write-now.js';

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** A setting procwarden refuses (an unusable PROCWARDEN_WATCHDOG) is bad input: status 2, one line. */
function configured<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    if (isProcwardenError(error)) throw new UsageError(error.message, EXIT_USAGE, false);
    throw error;
  }
}

function evidence(p: CaseProof): string {
  const ended = p.exitSignal ? `died of ${p.exitSignal}` : `exit ${p.exitCode}`;
  const markers = Object.entries(p.markers)
    .map(([name, written]) => `${name} ${written ? 'written' : 'absent'}`)
    .join(', ');
  const parts = [`${p.reason}`, ended, p.escalated ? `SIGKILL for ${p.killed}` : 'no SIGKILL'];
  if (markers) parts.push(markers);
  if (p.descendantAliveAfterWait !== null) {
    parts.push(`descendant ${p.descendantAliveAfterWait ? 'ALIVE' : 'gone'}`);
  }
  if (p.case === 'no-detach') {
    parts.push(`caller group ${p.facts.callerGroupAliveAfterRun ? 'alive' : 'DEAD'}`);
  }
  return `${parts.join(', ')} (${formatMs(p.durationMs)})`;
}

export async function proofCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseOptions(args, OPTIONS, EXIT_USAGE);
  if (values.help) {
    writeNow(1, PROOF_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`, EXIT_USAGE);

  // The summary is for a person: on stderr when stdout carries the JSON. Written with write(2): a
  // reader that has gone (`proof | head -3`) is no reason to stop proving; a failed write (ENOSPC)
  // is "write error" and status 1, as in every other command.
  const fd = values.json ? 2 : 1;
  const human = { write: (text: string) => writeNow(fd, text) };
  const paint = painter(useColour(values.json ? process.stderr : process.stdout));
  const sup = configured(() => new Supervisor());
  const root = mkdtempSync(join(tmpdir(), 'procwarden-proof-'));
  const table = platformTable();
  const proofs: CaseProof[] = [];
  try {
    const script = writeProofScripts(root);
    const library = new URL('../index.js', import.meta.url).href;
    human.write(
      `procwarden proof: ${CASES.length} live cases on ${process.platform}, node ${process.version}\n`,
    );
    for (const c of CASES) {
      const dir = join(root, c.name);
      mkdirSync(dir);
      const proof = await proveCase(c, { sup, table, script, dir, library });
      proofs.push(proof);
      const mark = proof.holds ? paint('green', 'holds') : paint('red', 'FAILS');
      human.write(`  ${mark}  ${c.name.padEnd(10)}  ${c.claim}\n`);
      human.write(`         ${''.padEnd(10)}  ${paint('dim', evidence(proof))}\n`);
      for (const f of proof.failed)
        human.write(`         ${''.padEnd(10)}  ${paint('red', `not true: ${f}`)}\n`);
    }
  } finally {
    await sup.cancelAll('proof ended');
    rmSync(root, { recursive: true, force: true });
  }
  const held = proofs.filter((p) => p.holds).length;
  if (values.json) writeNow(1, `${JSON.stringify(proofs, null, 2)}\n`);
  human.write(
    held === proofs.length
      ? `${paint('green', `All ${held} cases hold`)}: nothing outlived its run, and nothing else was hit.\n`
      : `${paint('red', `${proofs.length - held} of ${proofs.length} cases do not hold`)} on this machine.\n`,
  );
  return held === proofs.length ? 0 : EXIT_FAILURE;
}
