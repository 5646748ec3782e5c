// Deterministic simulation of real lanemux nodes (test/sim/sim.ts): many seeds, each one history
// of 2–4 nodes with cuts, partitions, stalled readers and producers and clock jumps, every
// invariant checked as it runs; a seed replays exactly; an injected fault is caught with its seed.
import { describe as suite, expect, it } from 'vitest';
import { describe, replayCommand, runSeed } from './sim.ts';

/**
 * The seeds of the sweep: a fixed count (`SIM_SEEDS` overrides; 10,000 by default) from `SIM_FROM`
 * (1), so every run checks the same histories however loaded the machine; it prints its rate.
 */
const SEEDS = Number(process.env['SIM_SEEDS'] ?? 10_000);
const FIRST_SEED = Number(process.env['SIM_FROM'] ?? 1);
/** `SIM_STATIC_CREDIT=1`: the sweep runs with `mux.autoCredit` off in every node (static windows of C). */
const AUTO_CREDIT = process.env['SIM_STATIC_CREDIT'] !== '1';
/** Generous: 10,000 seeds take about 2 minutes on a loaded 2-core machine. */
const SWEEP_TIMEOUT_MS = Math.max(60_000, SEEDS * 60);

suite('deterministic simulation', () => {
  it(
    'every seed delivers each record exactly once in order or ends with a typed error, within its bound, credit conserved, nothing left live',
    async () => {
      const started = performance.now();
      const cpu = process.cpuUsage();
      const failures: string[] = [];
      for (let s = FIRST_SEED; s < FIRST_SEED + SEEDS; s++) {
        const r = await runSeed({ seed: s, autoCredit: AUTO_CREDIT });
        if (!r.ok) failures.push(describe(r));
      }
      const secs = (performance.now() - started) / 1000;
      const used = process.cpuUsage(cpu);
      const cpuSecs = (used.user + used.system) / 1e6;
      console.log(
        `simulation: ${SEEDS} seeds (from ${FIRST_SEED}) in ${secs.toFixed(1)} s, ${(SEEDS / secs).toFixed(1)} seeds/s (${cpuSecs.toFixed(1)} s of CPU, ${(SEEDS / cpuSecs).toFixed(1)} seeds per CPU second)`,
      );
      expect(failures, failures.join('\n')).toEqual([]);
    },
    SWEEP_TIMEOUT_MS,
  );

  it('with credit auto-tuning, a link cut and restored at once resumes its streams: the producer keeps what a grown window had in flight', async () => {
    // Histories where a grown window once let the producer's replay ring drop records the consumer never got.
    for (const seed of [2755, 3498, 3805, 4337, 7919, 8292]) {
      const r = await runSeed({ seed, autoCredit: true });
      expect(r.failures, describe(r)).toEqual([]);
    }
  });

  it('with static credit windows (mux.autoCredit off), 500 seeds hold every invariant too', async () => {
    const failures: string[] = [];
    for (let s = 1; s <= 500; s++) {
      const r = await runSeed({ seed: s, autoCredit: false });
      if (!r.ok) failures.push(describe(r));
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it('one seed replays exactly: the same events, virtual time, deliveries and trace twice', async () => {
    for (const seed of [3, 41, 977]) {
      const a = await runSeed({ seed, trace: true });
      const b = await runSeed({ seed, trace: true });
      expect(b).toEqual(a);
      expect(a.events).toBeGreaterThan(0);
    }
  });

  it('a credit the receiver never granted is reported as a conservation failure naming its seed and replay', async () => {
    const r = await runSeed({ seed: 1, fault: { kind: 'credit' } });
    expect(r.ok).toBe(false);
    expect(r.failures.join('\n')).toMatch(/credit not conserved on session \d+ .*over the window \d+/);
    const text = describe(r);
    expect(text).toContain('seed 1: FAIL');
    expect(text).toContain(replayCommand(1));
    // Without the fault the same seed passes.
    expect((await runSeed({ seed: 1 })).ok).toBe(true);
  });

  it('a wire that duplicates or loses one batch never yields a duplicate or a gap: the link dies and streams end typed', async () => {
    for (const kind of ['duplicate', 'lose'] as const)
      for (const seed of [3, 4]) {
        const r = await runSeed({ seed, fault: { kind, nth: 6, minBytes: 120 } });
        expect(r.failures, describe(r)).toEqual([]);
      }
  });
});
