#!/usr/bin/env node
// Paired A/B of one decode-shape benchmark between two builds: A and B run in turn, A B B A A B …, and
// the ratio B/A is taken pair by pair (so a drift of the machine's speed hits both), then the median.
//
// Usage: build each side into a directory that can resolve lanemux's dependencies, for example
//   git worktree add /tmp/before <rev> && (cd /tmp/before && npm ci && npm run build)
//   npm run build
//   node bench/ab.mjs --a /tmp/before/dist --b dist [--pairs 16] [--impl auto|manual] [-- …mux-bench flags]
// One build against itself with a flag on one side only (resume off vs on, say):
//   node bench/ab.mjs --a dist --b dist --a-flags '--resume off' --pairs 24
// Prints one JSON line: medians of CPU µs per token (total, receiver, sender) on each side, the median
// ratio B/A with its range, and tokens per second.
// Stream setup instead (bench/lifecycle.mjs; CPU µs per stream, both nodes in one process):
//   node bench/ab.mjs --a <dist of A> --b dist --bench lifecycle --pairs 16 -- --mode zero-rtt --items 0
// Both nodes of the decode shape in one process (bench/inproc.mjs; CPU ns per token):
//   node bench/ab.mjs --a <dist of A> --b dist --bench inproc --node-flags --single-threaded --pairs 12 -- --passes 1000 --warm 500
// --node-flags go to node on both sides. On a shared 2-vCPU virtual machine whose speed drifts, the
// median ratio of pairs wanders far; `best`, the ratio of each side's best run, much less (a slow moment
// only ever adds time), and `--single-threaded` keeps V8's helper threads (concurrent marking, parallel
// scavenges, background compiles) out of the CPU compared. One build against itself, 12 pairs
// (`--a dist --b dist --bench inproc --node-flags --single-threaded`): median 1.111, best 1.008.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs, repoRoot } from './harness.mjs';

const dashes = process.argv.indexOf('--');
const args = parseArgs(process.argv.slice(2, dashes < 0 ? undefined : dashes));
if (args.a === undefined || args.b === undefined) {
  process.stderr.write('usage: node bench/ab.mjs --a <dist of A> --b <dist of B> [--pairs 16] [--impl auto] [-- …]\n');
  process.exit(2);
}
const pairs = Number(args.pairs ?? 16);
const impl = args.impl ?? 'auto';
const rest = dashes < 0 ? [] : process.argv.slice(dashes + 1);
const lifecycle = args.bench === 'lifecycle';
const inproc = args.bench === 'inproc';
if (args.bench !== undefined && !lifecycle && !inproc) {
  process.stderr.write(`--bench must be lifecycle or inproc (or left out for the decode shape), got ${args.bench}\n`);
  process.exit(2);
}
// Flag lists are taken verbatim from the command line: their value starts with dashes, which
// parseArgs reads as a flag of its own (`--a-flags '--resume off'` parsed as `a-flags: 'true'` until
// 2026-12-07, so an A/B "with a flag on one side only" ran the same thing on both sides).
const sideFlags = (flags) => (flags === undefined ? [] : String(flags).split(/\s+/).filter(Boolean));
const verbatim = (name) => {
  const at = process.argv.indexOf(`--${name}`);
  return at < 0 || (dashes >= 0 && at > dashes) ? [] : sideFlags(process.argv[at + 1]);
};
const nodeFlags = verbatim('node-flags');
const benchArgs = [
  ...nodeFlags,
  ...(lifecycle
    ? ['bench/lifecycle.mjs', ...rest]
    : inproc
      ? ['bench/inproc.mjs', ...rest]
      : ['bench/mux-bench.mjs', '--impl', impl, '--passes', '2000', '--warm', '1000', ...rest]),
];
/** The CPU figure compared. */
const cpuKey = lifecycle ? 'cpu_us_per_stream' : inproc ? 'cpu_ns_per_token' : 'total_cpu_us_per_token';

function run(dist, extra) {
  const out = execFileSync('node', [...benchArgs, ...extra], {
    cwd: repoRoot,
    env: { ...process.env, LANEMUX_DIST: resolve(dist) },
    encoding: 'utf8',
  });
  const row = JSON.parse(out.trim().split('\n').pop());
  if (row.error !== undefined) throw new Error(row.error);
  return row;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// The side that runs second in a pair measured ~3 % cheaper in an A/A run (one build against a copy
// of itself, 10 pairs): the order alternates, A B then B A, so that bias falls on both sides.
const aFlags = verbatim('a-flags');
const bFlags = verbatim('b-flags');
const runA = () => run(args.a, aFlags);
const runB = () => run(args.b, bFlags);
const rows = [];
for (let i = 0; i < pairs; i++) {
  if (i % 2 === 0) {
    const a = runA();
    rows.push({ a, b: runB() });
  } else {
    const b = runB();
    rows.push({ a: runA(), b });
  }
}
const of = (side, key) => median(rows.map((r) => r[side][key]));
const ratios = rows.map((r) => r.b[cpuKey] / r.a[cpuKey]);
const ratio = (key) => +median(rows.map((r) => r.b[key] / r.a[key])).toFixed(3);
const best = (side) => Math.min(...rows.map((r) => r[side][cpuKey]));
const spread = {
  median: +median(ratios).toFixed(3),
  min: +Math.min(...ratios).toFixed(3),
  max: +Math.max(...ratios).toFixed(3),
  // Each side's best run against the other's: a slow moment of the machine only ever adds time.
  best: +(best('b') / best('a')).toFixed(3),
};
console.log(
  JSON.stringify(
    inproc
      ? {
          bench: 'inproc',
          args: rest,
          node_flags: nodeFlags,
          pairs,
          cpu_ns_per_token: { a: of('a', cpuKey), b: of('b', cpuKey), best_a: best('a'), best_b: best('b') },
          ratio_b_over_a: spread,
          tokens_per_s: { a: of('a', 'tokens_per_s'), b: of('b', 'tokens_per_s') },
        }
      : lifecycle
        ? {
            bench: 'lifecycle',
            args: rest,
            pairs,
            cpu_us_per_stream: { a: of('a', cpuKey), b: of('b', cpuKey) },
            ratio_b_over_a: spread,
            streams_per_s: { a: of('a', 'streams_per_s'), b: of('b', 'streams_per_s') },
          }
        : {
            impl,
            args: rest,
            ...(aFlags.length > 0 ? { a_flags: aFlags } : {}),
            ...(bFlags.length > 0 ? { b_flags: bFlags } : {}),
            pairs,
            cpu_us_per_token: { a: of('a', cpuKey), b: of('b', cpuKey) },
            ratio_b_over_a: spread,
            recv_ratio: ratio('recv_cpu_us_per_token'),
            send_ratio: ratio('send_cpu_us_per_token'),
            tokens_per_s: { a: of('a', 'tokens_per_s'), b: of('b', 'tokens_per_s') },
          },
  ),
);
