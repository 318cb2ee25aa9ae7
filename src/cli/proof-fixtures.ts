import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The scripts the proof runs. They ship inside the package (as strings) and are written to a
 * temporary directory at run time, so `npx procwarden proof` works from any install. Each takes
 * a case directory as $1 and writes <name>.pid files and *.done markers there.
 */
const SCRIPTS: Record<string, string> = {
  // Traps SIGTERM, finishes an asynchronous cleanup (writes a marker), exits 0.
  'cleanup.sh': `dir=$1
echo $$ > "$dir/main.pid"
on_term() {
  sleep 0.2
  echo cleaned > "$dir/cleanup.done"
  echo "cleanup done"
  exit 0
}
trap on_term TERM
echo ready
while :; do sleep 0.05; done
`,
  // Ignores SIGTERM (and so do its sleeps, which inherit the ignore): only SIGKILL ends it.
  'ignore.sh': `dir=$1
trap '' TERM
echo $$ > "$dir/main.pid"
echo ready
while :; do sleep 0.05; done
echo never > "$dir/ignore.done"
`,
  // The parent exits at once on SIGTERM; its child traps SIGTERM, writes a marker and exits.
  'descendant.sh': `dir=$1
echo $$ > "$dir/parent.pid"
sh -c 'echo $$ > "$1/child.pid"; trap "echo got-term > \\"$1/child.done\\"; exit 0" TERM; while :; do sleep 0.05; done' child "$dir" &
trap 'exit 0' TERM
while [ ! -s "$dir/child.pid" ]; do sleep 0.01; done
echo ready
while :; do sleep 0.05; done
`,
  // A descendant escapes: new session (setsid) and re-parented away (its parent exits at once),
  // so neither the process group nor parent links lead to it. Only the run's cookie does.
  'escaped.sh': `dir=$1
echo $$ > "$dir/parent.pid"
"$PROOF_NODE" "$(dirname "$0")/detach.mjs" sh -c 'echo $$ > "$1/escapee.pid"; trap "echo got-term > \\"$1/escapee.done\\"; exit 0" TERM; while :; do sleep 0.05; done' escapee "$dir"
while [ ! -s "$dir/escapee.pid" ]; do sleep 0.01; done
echo ready
while :; do sleep 0.05; done
`,
  // node's detached spawn is setsid(); the intermediate then exits, so the escapee is re-parented.
  'detach.mjs': `import { spawn } from 'node:child_process';
const [command, ...args] = process.argv.slice(2);
spawn(command, args, { detached: true, stdio: 'ignore' }).unref();
`,
  // The sacrificial parent: leads its own process group, starts a bystander in that group, then a
  // run with containment 'none' (the run's processes share the group). After the run it reports
  // and stays alive, so the proof can see whether the group survived.
  'sacrificial.mjs': `import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
const [library, script, dir] = process.argv.slice(2);
const { run } = await import(library);
const bystander = spawn('sleep', ['300'], { stdio: 'ignore' });
writeFileSync(dir + '/bystander.pid', String(bystander.pid));
let out = '';
const handle = run({
  argv: ['/bin/sh', script, dir],
  containment: 'none',
  graceMs: 3000,
  output: { onData: (text) => { out += text; } },
});
const started = Date.now();
while (!out.includes('ready') && Date.now() - started < 10000) await new Promise((r) => setTimeout(r, 10));
handle.cancel('proof');
const result = await handle.result;
process.stdout.write(JSON.stringify({ result, bystander: bystander.pid }) + '\\n');
setInterval(() => {}, 60000);
`,
};

/** Writes every proof script into `dir`; returns the path of each by name. */
export function writeProofScripts(dir: string): (name: string) => string {
  for (const [name, text] of Object.entries(SCRIPTS)) writeFileSync(join(dir, name), text, { mode: 0o755 });
  return (name) => join(dir, name);
}
