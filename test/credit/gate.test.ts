import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { CreditClosed, CreditError, CreditGate, Gate } from '../../src/credit/index.ts';
import { LanemuxError } from '../../src/errors.ts';

type Settled = { state: 'pending' } | { state: 'resolved' } | { state: 'rejected'; reason: unknown };

/** Observes a promise's settlement without awaiting it. */
function track(promise: Promise<void>): { readonly current: Settled } {
  const box: { current: Settled } = { current: { state: 'pending' } };
  promise.then(
    () => (box.current = { state: 'resolved' }),
    (reason: unknown) => (box.current = { state: 'rejected', reason }),
  );
  return box;
}

/** Lets queued promise reactions run (microtasks only; no timers). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

describe('model Gate', () => {
  it('follows the reference trace, window 2', () => {
    const g = new Gate(2);
    const rows: Array<[string, () => string | undefined, number, string | null]> = [
      ['acquire 1', () => g.acquire(1), 1, null],
      ['acquire 1', () => g.acquire(1), 0, null],
      ['acquire 1', () => g.acquire(1), 0, null],
      ['grant 3', () => void g.grant(3), 3, null],
      ['acquire 2', () => g.acquire(2), 1, null],
      ['close END', () => void g.close('END'), 1, 'END'],
      ['acquire 1', () => g.acquire(1), 1, 'END'],
      ['grant 5', () => void g.grant(5), 1, 'END'],
      ['close CANCELLED', () => void g.close('CANCELLED'), 1, 'END'],
    ];
    const answers = ['acquired', 'acquired', 'wait', undefined, 'acquired', undefined, 'closed', undefined, undefined];
    rows.forEach(([op, run, available, closed], i) => {
      expect(run(), op).toBe(answers[i]);
      expect([g.available, g.closed], op).toEqual([available, closed]);
    });
  });

  it('edge: opened(0), then acquire 0 → acquired, available 0', () => {
    const g = new Gate(0);
    expect(g.acquire(0)).toBe('acquired');
    expect(g.available).toBe(0);
  });

  it('waiting consumes nothing', () => {
    const g = new Gate(3);
    expect(g.acquire(4)).toBe('wait');
    expect(g.available).toBe(3);
    expect(g.acquire(3)).toBe('acquired');
  });

  it('a closed gate answers closed even with credit left, and ignores grants', () => {
    const g = new Gate(5);
    g.close('CANCELLED');
    expect(g.acquire(1)).toBe('closed');
    expect(g.acquire(0)).toBe('closed');
    g.grant(10);
    expect(g.available).toBe(5);
  });

  it('refuses counts that are not safe naturals, and sums that overflow', () => {
    for (const bad of [-1, 1.5, Number.NaN, Infinity, 2 ** 53]) {
      expect(() => new Gate(bad)).toThrow(CreditError);
      expect(() => new Gate(1).acquire(bad)).toThrow(/safe non-negative integer/);
      expect(() => new Gate(1).grant(bad)).toThrow(CreditError);
    }
    const g = new Gate(Number.MAX_SAFE_INTEGER);
    expect(() => g.grant(1)).toThrow(/overflowed/);
    expect(g.available).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('clone is independent', () => {
    const g = new Gate(2);
    const c = g.clone();
    c.acquire(2);
    c.close('END');
    expect([g.available, g.closed]).toEqual([2, null]);
    expect([c.available, c.closed]).toEqual([0, 'END']);
  });
});

describe('async CreditGate', () => {
  it('an acquire with credit available takes it in the same turn and resolves', async () => {
    const gate = new CreditGate(2);
    const p = gate.acquire(1);
    expect(gate.available).toBe(1);
    expect(gate.acquire(1)).toBe(p); // the shared resolved promise: nothing allocated per acquire
    expect(gate.available).toBe(0);
    await expect(p).resolves.toBeUndefined();
  });

  it('waiters resolve in FIFO order on grant', async () => {
    const gate = new CreditGate(0);
    const order: number[] = [];
    const ps = [1, 2, 3].map((i) => gate.acquire(1).then(() => order.push(i)));
    expect(gate.waiting).toBe(3);
    gate.grant(1);
    await settle();
    expect(order).toEqual([1]);
    expect(gate.waiting).toBe(2);
    gate.grant(2);
    await Promise.all(ps);
    expect(order).toEqual([1, 2, 3]);
    expect(gate.available).toBe(0);
  });

  it('a smaller acquire never overtakes a queued larger one', async () => {
    const gate = new CreditGate(0);
    const big = track(gate.acquire(3));
    const small = track(gate.acquire(1));
    gate.grant(2);
    await settle();
    expect([big.current.state, small.current.state]).toEqual(['pending', 'pending']);
    expect(gate.available).toBe(2);
    expect(gate.tryAcquire(1)).toBe('wait'); // nor does a non-waiting acquire
    expect(gate.tryAcquire(0)).toBe('acquired');
    gate.grant(1);
    await settle();
    expect([big.current.state, small.current.state]).toEqual(['resolved', 'pending']);
    expect(gate.available).toBe(0);
    gate.grant(1);
    await settle();
    expect(small.current.state).toBe('resolved');
  });

  it('close rejects every waiter with CreditClosed carrying the first reason', async () => {
    const gate = new CreditGate(0);
    const waiters = [gate.acquire(1), gate.acquire(2), gate.acquire(1)];
    gate.close('END');
    gate.close('CANCELLED');
    expect(gate.waiting).toBe(0);
    for (const w of waiters) {
      const error = await w.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CreditClosed);
      expect(error).toBeInstanceOf(CreditError);
      expect(error).toBeInstanceOf(LanemuxError);
      expect((error as CreditClosed).code).toBe('ERR_CREDIT_CLOSED');
      expect((error as CreditClosed).reason).toBe('END');
      expect((error as CreditClosed).message).toContain('END');
    }
  });

  it('an acquire after close rejects even with credit left, with the first reason', async () => {
    const gate = new CreditGate(5);
    gate.close('CANCELLED');
    gate.close('END');
    gate.grant(3);
    await expect(gate.acquire(1)).rejects.toMatchObject({ code: 'ERR_CREDIT_CLOSED', reason: 'CANCELLED' });
    await expect(gate.acquire(0)).rejects.toBeInstanceOf(CreditClosed);
    expect(gate.available).toBe(5);
    expect(gate.tryAcquire(1)).toBe('closed');
  });

  it('an AbortSignal rejects that waiter only, with its reason, and takes no credit', async () => {
    const gate = new CreditGate(0);
    const controller = new AbortController();
    const first = track(gate.acquire(1, { signal: controller.signal }));
    const second = track(gate.acquire(1));
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await settle();
    expect(first.current).toEqual({ state: 'rejected', reason });
    expect(second.current.state).toBe('pending');
    expect(gate.waiting).toBe(1);
    expect(gate.closed).toBeNull(); // the gate itself stays open
    gate.grant(1);
    await settle();
    expect(second.current.state).toBe('resolved');
    expect(gate.available).toBe(0); // the aborted waiter neither took nor returned credit
  });

  it('an already-aborted signal rejects without taking credit, even when credit is available', async () => {
    const gate = new CreditGate(3);
    const controller = new AbortController();
    controller.abort('stop');
    await expect(gate.acquire(1, { signal: controller.signal })).rejects.toBe('stop');
    expect(gate.available).toBe(3);
  });

  it('aborting the head waiter lets the waiters behind it proceed', async () => {
    const gate = new CreditGate(1);
    const controller = new AbortController();
    const big = track(gate.acquire(3, { signal: controller.signal }));
    const small = track(gate.acquire(1));
    await settle();
    expect(small.current.state).toBe('pending');
    controller.abort();
    await settle();
    expect(big.current.state).toBe('rejected');
    expect(small.current.state).toBe('resolved');
    expect(gate.available).toBe(0);
  });

  it('aborting after the acquire resolved changes nothing, and the abort listener is removed', async () => {
    const gate = new CreditGate(0);
    const controller = new AbortController();
    const remove = vi.spyOn(controller.signal, 'removeEventListener');
    const p = track(gate.acquire(1, { signal: controller.signal }));
    gate.grant(1);
    expect(remove).toHaveBeenCalledTimes(1);
    controller.abort();
    await settle();
    expect(p.current.state).toBe('resolved');
    expect(gate.available).toBe(0);
  });

  it('no lost wakeup: a grant in the same turn as the wait is decided at once, before a later close', async () => {
    const gate = new CreditGate(0);
    const p = track(gate.acquire(1));
    gate.grant(1); // same synchronous turn as the acquire
    expect(gate.waiting).toBe(0);
    expect(gate.available).toBe(0);
    gate.close('END'); // too late to affect the waiter that the grant already served
    await settle();
    expect(p.current.state).toBe('resolved');
  });

  it('a grant that lands before the acquire is seen by it (registration and check are one step)', async () => {
    const gate = new CreditGate(0);
    gate.grant(1);
    const p = track(gate.acquire(1));
    gate.close('END');
    await settle();
    expect(p.current.state).toBe('resolved');
  });
});

describe('async CreditGate under random operation sequences (fast-check)', () => {
  it('resolves in call order, conserves credit, and rejects every unresolved waiter on close', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('acquire' as const), n: fc.integer({ min: 1, max: 4 }), abortable: fc.boolean() }),
      fc.record({ kind: fc.constant('grant' as const), n: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ kind: fc.constant('abort' as const), which: fc.nat() }),
      fc.record({ kind: fc.constant('close' as const), reason: fc.constantFrom('END', 'ERR', 'CANCELLED') }),
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 6 }), fc.array(op, { maxLength: 60 }), async (window, ops) => {
        const gate = new CreditGate(window);
        const resolved: number[] = [];
        const rejected = new Map<number, unknown>();
        const sizes: number[] = [];
        const controllers: AbortController[] = [];
        let granted = 0;
        let firstReason: string | null = null;
        for (const o of ops) {
          if (o.kind === 'acquire') {
            const id = sizes.length;
            sizes.push(o.n);
            const controller = new AbortController();
            if (o.abortable) controllers.push(controller);
            gate.acquire(o.n, o.abortable ? { signal: controller.signal } : {}).then(
              () => resolved.push(id),
              (e: unknown) => rejected.set(id, e),
            );
          } else if (o.kind === 'grant') {
            if (gate.closed === null) granted += o.n;
            gate.grant(o.n);
          } else if (o.kind === 'abort') {
            controllers[o.which % Math.max(1, controllers.length)]?.abort('aborted');
          } else {
            firstReason ??= o.reason;
            gate.close(o.reason);
          }
        }
        gate.close('teardown');
        firstReason ??= 'teardown';
        await settle();
        // Every acquire settled exactly once.
        expect(resolved.length + rejected.size).toBe(sizes.length);
        // FIFO: resolution order is call order.
        expect(resolved).toEqual([...resolved].sort((a, b) => a - b));
        // Conservation: what was offered is either still available or was taken by a resolved acquire.
        const taken = resolved.reduce((sum, id) => sum + (sizes[id] as number), 0);
        expect(window + granted).toBe(gate.available + taken);
        for (const reason of rejected.values()) {
          if (reason === 'aborted') continue;
          expect(reason).toBeInstanceOf(CreditClosed);
          expect((reason as CreditClosed).reason).toBe(firstReason);
        }
      }),
      { numRuns: 300 },
    );
  });
});
