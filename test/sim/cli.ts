/**
 * `npm run sim -- --seed N`: replay one seed (its trace and verdict).
 * `npm run sim -- --seeds M [--from S]`: run M seeds from S (default 1); prints seeds/s and every failure.
 */
import { describe, replayCommand, runSeed, summary } from './sim.ts';

const args = process.argv.slice(2);
const flag = (name: string): number | undefined => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = Number(args[i + 1]);
  if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${name} needs a whole number`);
  return v;
};

/** `--static-credit`: no node tunes its credit windows (`mux.autoCredit: false`; on by default). */
const autoCredit = !args.includes('--static-credit');
const one = flag('--seed');
if (one !== undefined) {
  const r = await runSeed({ seed: one, trace: true, autoCredit });
  for (const line of r.trace) process.stdout.write(`${line}\n`);
  process.stdout.write(`${summary(r)}\n${describe(r)}\n`);
  process.exit(r.ok ? 0 : 1);
}
const count = flag('--seeds') ?? 1_000;
const from = flag('--from') ?? 1;
const started = performance.now();
const cpu0 = process.cpuUsage();
let failed = 0;
let events = 0;
/** The longest history run (most events), to say how deep the seeds go. */
let longest = { seed: 0, events: 0, virtualMs: 0 };
let lastReport = started;
for (let s = from; s < from + count; s++) {
  const r = await runSeed({ seed: s, autoCredit });
  events += r.events;
  if (r.events > longest.events) longest = { seed: s, events: r.events, virtualMs: r.virtualMs };
  if (!r.ok) {
    failed++;
    process.stdout.write(`${describe(r)}\n`);
  }
  const now = performance.now();
  if (now - lastReport > 10_000) {
    lastReport = now;
    const done = s - from + 1;
    process.stdout.write(
      `… ${done} seeds, ${(done / ((now - started) / 1000)).toFixed(1)} seeds/s, ${failed} failed\n`,
    );
  }
}
const secs = (performance.now() - started) / 1000;
// CPU time too: on a shared machine it says what the seeds cost, whatever else runs.
const used = process.cpuUsage(cpu0);
const cpuSecs = (used.user + used.system) / 1e6;
process.stdout.write(
  `${count} seeds in ${secs.toFixed(1)} s (${cpuSecs.toFixed(1)} s of CPU, ${(count / cpuSecs).toFixed(1)} seeds per CPU second): ${(count / secs).toFixed(1)} seeds/s, ${(events / secs).toFixed(0)} events/s, ${failed} failed${failed > 0 ? ` (replay one: ${replayCommand(from)} … )` : ''}\n`,
);
process.stdout.write(
  `longest history: seed ${longest.seed}, ${longest.events} events over ${Math.round(longest.virtualMs)} virtual ms\n`,
);
process.exit(failed === 0 ? 0 : 1);
