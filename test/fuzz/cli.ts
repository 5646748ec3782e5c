/**
 * `npm run fuzz -- [--inputs 1000000] [--seed N] [--targets a,b] [--max-ms 250] [--hang-ms 10000]`
 * `npm run fuzz -- --replay <hex> --target <name>`   ·   `npm run fuzz -- --list`
 *
 * Structure-aware fuzzing of every decoder that reads peer bytes (test/fuzz/targets.ts): mutated
 * valid encodings plus random bytes, dealt round-robin to the targets. The loop runs in a worker
 * thread; this thread is its watchdog: a decode that makes no progress for --hang-ms is reported as
 * a hang with its input. Prints inputs/s per target and every escape with a one-line replay
 * command; exits 1 if anything escaped. The same --seed, --inputs and --targets give the same run.
 */
import { Worker } from 'node:worker_threads';
import { hex as toHex } from '../wire/helpers.ts';
import type { Escape, FuzzResult } from './harness.ts';
import { replay } from './harness.ts';
import { MAX_INPUT } from './mutate.ts';
import { TARGETS, selectTargets } from './targets.ts';

const DEFAULT_SEED = 0x1a9e_3c5d;

function args(argv: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) m.set(a.slice(2), 'true');
    else m.set(a.slice(2), (i++, next));
  }
  return m;
}

const a = args(process.argv.slice(2));
const num = (k: string, d: number): number => {
  const v = a.get(k);
  if (v === undefined) return d;
  const n = Number(v.replaceAll('_', ''));
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${k} must be a number, got ${v}`);
  return n;
};

const replayCmd = (e: { hex: string; target: string }): string =>
  `npm run fuzz -- --replay ${e.hex || '""'} --target ${e.target}`;

if (a.has('help')) {
  console.log('usage: npm run fuzz -- [--inputs N] [--seed N] [--targets a,b] [--max-ms MS] [--hang-ms MS]');
  console.log('       npm run fuzz -- --replay <hex> --target <name>   |   --list');
  process.exit(0);
} else if (a.has('list')) {
  for (const t of TARGETS) console.log(`${t.name.padEnd(20)} ${t.what}`);
  process.exit(0);
} else if (a.has('replay')) {
  const name = a.get('target');
  const t = TARGETS.find((x) => x.name === name);
  if (t === undefined) {
    console.error(`--replay needs --target, one of: ${TARGETS.map((x) => x.name).join(', ')}`);
    process.exit(2);
  }
  const text = a.get('replay') === 'true' ? '' : (a.get('replay') ?? '');
  const input = Uint8Array.from(text.match(/../g) ?? [], (h) => Number.parseInt(h, 16));
  const why = replay(t, input, num('max-ms', 250));
  console.log(why === null ? `${t.name}: no escape (${input.length} bytes)` : `${t.name}: ESCAPE ${why}`);
  process.exit(why === null ? 0 : 1);
} else {
  const seed = num('seed', DEFAULT_SEED) >>> 0;
  const inputs = Math.floor(num('inputs', 1_000_000));
  const targetList = a.get('targets') ?? 'all';
  const targets = selectTargets(targetList);
  const hangMs = num('hang-ms', 10_000);
  const shared = new SharedArrayBuffer(16 + MAX_INPUT);
  const head = new Int32Array(shared, 0, 4);
  const t0 = performance.now();
  console.log(
    `fuzz: ${inputs.toLocaleString('en-US')} inputs, seed 0x${seed.toString(16)}, ${targets.length} targets: ${targets.map((t) => t.name).join(', ')}`,
  );
  const worker = new Worker(new URL('./worker.ts', import.meta.url), {
    workerData: { seed, inputs, targets: targetList, maxMs: num('max-ms', 250), shared },
  });
  const escapes: Escape[] = [];
  let last = 0;
  let lastAt = performance.now();
  const watch = setInterval(() => {
    const now = performance.now();
    const started = Atomics.load(head, 0);
    if (started !== last) {
      if (Math.floor(started / 100_000) !== Math.floor(last / 100_000))
        console.log(`  ${started.toLocaleString('en-US')} inputs, ${((now - t0) / 1000).toFixed(0)} s`);
      last = started;
      lastAt = now;
      return;
    }
    // Before the first input the worker is still loading (transpiling the sources): a longer bound.
    if (now - lastAt < (started === 0 ? Math.max(hangMs, 120_000) : hangMs)) return;
    const t = targets[Atomics.load(head, 1)]!;
    const input = new Uint8Array(shared, 16, Math.min(Atomics.load(head, 2), MAX_INPUT)).slice();
    const e = { target: t.name, index: started - 1, hex: toHex(input), why: `no progress for ${hangMs} ms (hang)` };
    escapes.push(e);
    finish(undefined, e);
  }, 500);
  worker.on('message', (m: { type: string; escape?: Escape; result?: FuzzResult }) => {
    if (m.type === 'escape') {
      escapes.push(m.escape!);
      console.log(`  ESCAPE ${m.escape!.target} #${m.escape!.index}: ${m.escape!.why}`);
    } else if (m.type === 'done') finish(m.result);
  });
  worker.on('error', (err) => {
    console.error(`fuzz worker failed: ${err.stack ?? String(err)}`);
    finish(undefined);
  });

  function finish(r: FuzzResult | undefined, hang?: Escape): void {
    clearInterval(watch);
    void worker.terminate();
    const secs = (performance.now() - t0) / 1000;
    if (r !== undefined) {
      console.log(
        `\n${'target'.padEnd(20)}${'inputs'.padStart(10)}${'decoded'.padStart(10)}${'refused'.padStart(10)}${'escapes'.padStart(9)}${'inputs/s'.padStart(11)}`,
      );
      for (const [name, s] of Object.entries(r.stats)) {
        const rate = s.ms > 0 ? Math.round((s.inputs / s.ms) * 1000) : 0;
        console.log(
          `${name.padEnd(20)}${String(s.inputs).padStart(10)}${String(s.decoded).padStart(10)}${String(s.refused).padStart(10)}${String(s.escapes).padStart(9)}${rate.toLocaleString('en-US').padStart(11)}`,
        );
      }
      console.log(
        `\n${r.inputs.toLocaleString('en-US')} inputs in ${secs.toFixed(1)} s: ${Math.round(r.inputs / secs).toLocaleString('en-US')} inputs/s end to end (generation, guard, judging), seed 0x${seed.toString(16)}`,
      );
    } else if (hang !== undefined) {
      console.log(`\nHANG in ${hang.target} at input #${hang.index} after ${secs.toFixed(1)} s`);
    }
    console.log(`${escapes.length} escapes`);
    for (const e of escapes)
      console.log(`  ${e.target} #${e.index}: ${e.why}\n    input ${e.hex}\n    ${replayCmd(e)}`);
    process.exit(escapes.length === 0 && (r !== undefined || hang !== undefined) ? 0 : 1);
  }
}
