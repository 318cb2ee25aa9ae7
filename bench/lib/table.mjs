/** Renders figure results as aligned text (the console) and as Markdown (results/latest.md, README). */

const num = (x) => {
  if (x === undefined || x === null || Number.isNaN(x)) return '—';
  const a = Math.abs(x);
  return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
};

function cells(figure) {
  const head = ['case', 'contender', `median ${figure.unit}`, 'min', 'max', 'n', '× raw'];
  const body = [];
  for (const c of figure.cases) {
    for (const r of c.rows) {
      body.push(
        r.na
          ? [c.name, r.contender, `n/a (${r.na.split(':')[0]})`, '', '', '', '']
          : [
              c.name,
              r.contender,
              num(r.median),
              num(r.min),
              num(r.max),
              String(r.n),
              r.ratio === undefined ? '' : `${r.ratio.toFixed(2)}×`,
            ],
      );
    }
  }
  return { head, body };
}

/** Each n/a contender once, with its full reason (the table cell shows only the code). */
const naNotes = (figure) => {
  const seen = new Map();
  for (const c of figure.cases) for (const r of c.rows) if (r.na) seen.set(r.contender, r.na);
  return [...seen].map(([contender, reason]) => `${contender}: n/a — ${reason}`);
};

const goalLine = (g) => `${g.met === null ? 'n/a' : g.met ? 'MET' : 'NOT MET'}: ${g.text} — ${g.value}`;

export function renderText(figure) {
  const { head, body } = cells(figure);
  const width = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (row) =>
    row.map((cell, i) => (i >= 2 ? cell.padStart(width[i]) : cell.padEnd(width[i]))).join('  ');
  const out = [`(${figure.id}) ${figure.title}`, line(head), ...body.map(line)];
  for (const note of [...(figure.notes ?? []), ...naNotes(figure)]) out.push(`  note: ${note}`);
  for (const g of figure.goals ?? []) out.push(`  ${goalLine(g)}`);
  return out.join('\n');
}

export function renderMarkdown(figure) {
  const { head, body } = cells(figure);
  const row = (r) => `| ${r.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`;
  const out = [
    `### (${figure.id}) ${figure.title}`,
    '',
    row(head),
    row(head.map(() => '---')),
    ...body.map(row),
  ];
  const notes = [...(figure.notes ?? []), ...naNotes(figure)];
  if (notes.length || figure.goals?.length) out.push('');
  for (const note of notes) out.push(`- ${note}`);
  for (const g of figure.goals ?? []) out.push(`- **${goalLine(g)}**`);
  return out.join('\n');
}

export { num };
