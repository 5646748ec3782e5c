/**
 * SlotBuffer's ring starts at four entries and doubles up to C+1 instead of being allocated at C+1
 * per slot. A model check: random pushes, forced pushes, takes, clears and closes over many
 * wrap-arounds and growths (capacities 1..40: several doublings, a clamped last step) must give
 * exactly what a plain FIFO of capacity C+1 gives —
 * kind, value and byte size of every frame, in order, and the same accept/refuse answers.
 */
import { describe, expect, it } from 'vitest';
import { SlotBuffer } from '../../src/mux/slot-buffer.ts';
import { mulberry32Unit } from '../wire/helpers.ts';

/** Deterministic PRNG (mulberry32), so a failure reproduces. */
const prng = mulberry32Unit;

describe('SlotBuffer storage', () => {
  it('behaves as a bounded FIFO through wrap-arounds, forced pushes and clears', () => {
    const r = prng(11);
    for (let round = 0; round < 600; round++) {
      const capacity = 1 + Math.floor(r() * 40);
      const buf = new SlotBuffer(capacity);
      let drained = -1;
      buf.onDrain = (bytes) => {
        drained = bytes;
      };
      const model: Array<{ kind: number; value: unknown; bytes: number }> = [];
      let closed = false;
      for (let step = 0; step < 200; step++) {
        const op = r();
        if (op < 0.45) {
          const f = { kind: Math.floor(r() * 3), value: { n: step }, bytes: Math.floor(r() * 5000) };
          const ok = buf.push(f.kind, f.value, f.bytes);
          const expected = !closed && model.length < capacity;
          expect(ok).toBe(expected);
          if (expected) model.push(f);
        } else if (op < 0.5) {
          const f = { kind: 4, value: undefined, bytes: 0 };
          buf.pushForced(f.kind, f.value);
          if (!closed) {
            if (model.length >= capacity) model.pop();
            model.push(f);
          }
        } else if (op < 0.93) {
          const took = buf.take();
          expect(took).toBe(model.length > 0);
          if (took) {
            const f = model.shift()!;
            expect(buf.kind).toBe(f.kind);
            expect(buf.value).toBe(f.value);
            expect(drained).toBe(f.bytes);
          }
        } else if (op < 0.97) {
          buf.clear();
          model.length = 0;
        } else if (op < 0.98) {
          buf.close();
          closed = true;
        }
        expect(buf.length).toBe(model.length);
      }
    }
  });
});
