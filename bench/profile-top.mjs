#!/usr/bin/env node
// Top self-time entries of a V8 .cpuprofile (node --cpu-prof), by function and file:line.
// Usage: node bench/profile-top.mjs <file.cpuprofile> [--top 5] [--root /work/main] [--lines <function name>]
// --lines: instead, the samples of every function of that name by source line (V8's position ticks), as a
// share of that function's. A line of a function inlined into it is reported under the function's own file
// with the callee's line number, so a line that falls outside the function belongs to a callee.
import fs from 'node:fs';
import { parseArgs } from './harness.mjs';

const file = process.argv[2];
const args = parseArgs(process.argv.slice(3));
const top = Number(args.top ?? 5);
const prof = JSON.parse(fs.readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
// timeDeltas[i] is the time before sample i; attribute it to the sampled node.
for (let i = 0; i < prof.samples.length; i++) {
  const id = prof.samples[i];
  self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0));
}
if (args.lines !== undefined) {
  const lines = new Map();
  let ticks = 0;
  for (const n of prof.nodes) {
    if (n.callFrame.functionName !== args.lines) continue;
    let url = n.callFrame.url.replace(/^file:\/\//, '');
    if (args.root) url = url.replace(`${args.root}/`, '');
    for (const p of n.positionTicks ?? []) {
      const key = `${url}:${p.line}`;
      lines.set(key, (lines.get(key) ?? 0) + p.ticks);
      ticks += p.ticks;
    }
  }
  for (const [k, t] of [...lines].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${((t / ticks) * 100).toFixed(1).padStart(5)} %  ${String(t).padStart(7)} ticks  ${k}`);
  console.log(`${ticks} ticks in ${args.lines}`);
  process.exit(0);
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const agg = new Map();
for (const [id, us] of self) {
  const cf = byId.get(id).callFrame;
  let url = cf.url.replace(/^file:\/\//, '');
  if (args.root) url = url.replace(args.root + '/', '');
  const key = `${cf.functionName || '(anonymous)'} ${url ? `${url}:${cf.lineNumber + 1}` : ''}`.trim();
  agg.set(key, (agg.get(key) ?? 0) + us);
}
const rows = [...agg].sort((a, b) => b[1] - a[1]).slice(0, top);
for (const [k, us] of rows)
  console.log(`${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(1).padStart(8)} ms  ${k}`);
console.log(`total ${(total / 1000).toFixed(0)} ms sampled`);
