import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { apply, brokenProperties, enabled, initial, isDeadlock } from './model-system.ts';
import type { FlushPolicy, SystemState } from './model-system.ts';

// Random schedules: each pick selects one of the enabled steps (modulo their count), so every schedule is legal.
const windows = fc
  .tuple(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 40 }))
  .map(([ws, extra]) => [ws, ws + extra] as const); // Ws ≤ Wr, as negotiation guarantees
const schedule = fc.array(fc.nat(), { minLength: 1, maxLength: 400 });

function run(ws: number, wr: number, picks: readonly number[], policy: FlushPolicy, maxSent: number): SystemState[] {
  let s = initial(ws, wr);
  const visited = [s];
  for (const pick of picks) {
    const steps = enabled(s, policy, maxSent);
    if (steps.length === 0) break;
    const { next, violation } = apply(s, steps[pick % steps.length]!);
    if (violation) throw new Error(`violation after ${visited.length} steps`);
    s = next;
    visited.push(s);
  }
  return visited;
}

describe('closed credit system properties over random operation sequences (fast-check)', () => {
  it('conserved, never_overruns, buffer_bounded and blocked_sender_is_waited_for hold after every step', () => {
    fc.assert(
      fc.property(windows, schedule, ([ws, wr], picks) => {
        for (const s of run(ws, wr, picks, 'any', Number.MAX_SAFE_INTEGER)) {
          expect(brokenProperties(s)).toEqual([]);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('with flush-before-block, no reachable state is a deadlock', () => {
    fc.assert(
      fc.property(windows, schedule, ([ws, wr], picks) => {
        for (const s of run(ws, wr, picks, 'before-block', 1_000)) {
          expect(isDeadlock(s, 'before-block', 1_000)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('without flushes, a sender with a smaller window than the receiver batch stalls', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 20 }), schedule, (ws, k, picks) => {
        const wr = 2 * (ws + k); // batch = ws + k > ws: the sender can never reach the threshold
        const visited = run(ws, wr, [...picks, ...Array.from({ length: 10 * ws }, () => 0)], 'never', 1_000);
        const last = visited[visited.length - 1]!;
        expect(isDeadlock(last, 'never', 1_000)).toBe(true);
        expect(last.win.pending).toBe(ws);
      }),
      { numRuns: 100 },
    );
  });
});
