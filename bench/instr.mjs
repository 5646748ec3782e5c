#!/usr/bin/env node
// Instructions per token, A against B: the in-process decode shape (bench/inproc.mjs, on its virtual
// clock) under valgrind's callgrind, which counts the instructions both nodes execute, JIT code
// included. A count does not move with the machine's speed as CPU time does (on a shared 2-vCPU
// virtual machine the time A/B of bench/ab.mjs has a median of 1.11 for one build against itself),
// so a change of a few percent shows in one run: one build against itself gave 1.004, and separate
// runs of one build 4,206 to 4,320 instructions per token (trust differences above about 3 %). It is
// not time: a cache miss costs one instruction here, and under valgrind V8 runs fifty times slower,
// so a change can count far better than it times (the replay log moved from one pointer array to a
// typed array of numbers: 0.82 here, 0.96 and 0.99 in time A/Bs of bench/ab.mjs): confirm a count
// with a time A/B before keeping a change. Run it on a quiet machine: with other benchmarks beside it
// one build counted 8 % apart between runs.
//
// Each build runs twice, at `--short` and `--long` timed passes after the same warm-up, and the
// difference is divided by the tokens between them: start-up, module loading and the warm-up's
// compiles fall out. The virtual clock keeps the timers (reply linger, PING spacing) off the wall
// clock, which valgrind slows fifty times, and V8's --predictable its garbage collector.
//
// Usage (valgrind installed, each side built):
//   node bench/instr.mjs --a <dist of A> --b <dist of B> [--short 200] [--long 400] [--warm 200] [-- …inproc flags]
//   e.g. node bench/instr.mjs --a /tmp/before/dist --b dist -- --peers 16
// Prints one JSON line: instructions per token of each side and B over A. About four minutes.
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs, repoRoot, round } from './harness.mjs';

const dashes = process.argv.indexOf('--');
const args = parseArgs(process.argv.slice(2, dashes < 0 ? undefined : dashes));
if (args.a === undefined || args.b === undefined) {
  process.stderr.write(
    'usage: node bench/instr.mjs --a <dist of A> --b <dist of B> [--short 200] [--long 400] [-- …]\n',
  );
  process.exit(2);
}
const rest = dashes < 0 ? [] : process.argv.slice(dashes + 1);
const short = Number(args.short ?? 200);
const long = Number(args.long ?? 400);
const warm = Number(args.warm ?? 200);
const slots = Number(parseArgs(rest).slots ?? 1024);
if (!(long > short && short > 0)) throw new Error(`--long must exceed --short (> 0), got ${short} and ${long}`);

/** Instructions callgrind counted over one whole run of inproc.mjs with `passes` timed passes. */
function instructions(dist, passes) {
  const r = spawnSync(
    'valgrind',
    [
      '--tool=callgrind',
      '--callgrind-out-file=/dev/null',
      '--cache-sim=no',
      // V8 writes and rewrites code at run time: valgrind must notice it outside mapped files.
      '--smc-check=all-non-file',
      'node',
      '--single-threaded',
      // V8's own heuristics off the clock too: a fixed GC schedule, no time-driven heap sizing.
      '--predictable',
      '--predictable-gc-schedule',
      'bench/inproc.mjs',
      ...rest,
      '--virtual-clock',
      '--passes',
      String(passes),
      '--warm',
      String(warm),
    ],
    { cwd: repoRoot, env: { ...process.env, LANEMUX_DIST: resolve(dist) }, encoding: 'utf8' },
  );
  if (r.error?.code === 'ENOENT') throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
  const m = /Collected : (\d+)/.exec(r.stderr ?? '');
  if (r.status !== 0 || m === null)
    throw new Error(`callgrind gave no count for ${dist} (exit ${r.status}):\n${(r.stderr ?? '').slice(-800)}`);
  return Number(m[1]);
}

/** Instructions per token between the short and the long run. */
function perToken(dist) {
  const a = instructions(dist, short);
  const b = instructions(dist, long);
  return (b - a) / ((long - short) * slots);
}

const a = perToken(args.a);
const b = perToken(args.b);
console.log(
  JSON.stringify({
    bench: 'instr',
    args: rest,
    short,
    long,
    warm,
    instructions_per_token: { a: round(a, 1), b: round(b, 1) },
    ratio_b_over_a: round(b / a, 4),
  }),
);
