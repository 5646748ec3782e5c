import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AUTO_FAST_EPOCH_MS, AutoWindow } from '../../src/credit/auto-window.ts';
import { CreditClass } from '../../src/credit/classify.ts';
import { ReceiverAccount } from '../../src/credit/receiver-account.ts';
import { SenderLedger } from '../../src/credit/sender-ledger.ts';

interface Run {
  window: number;
  /** Records consumed over the last second of the run. */
  lastSecond: number;
  maxWindow: number;
}

/**
 * A 1 ms-step closed loop: an always-ready sender spends all its credit at once, records and grants
 * each take rtt/2, the consumer takes up to `rate` records per ms. Fully deterministic.
 */
function simulate(opts: {
  base: number;
  rtt: number;
  rate: number;
  /** The consumer reads only every this many ms. Defaults to 1. */
  every?: number;
  ms: number;
  byteBudget: number;
  recordBytes?: number;
  auto?: boolean;
  fill?: (now: number) => number;
}): Run {
  const size = opts.recordBytes ?? 1024;
  const half = opts.rtt / 2;
  const account = new ReceiverAccount(opts.base, { watermark: opts.byteBudget });
  const auto = new AutoWindow(opts.base, 0, { byteBudget: opts.byteBudget });
  let senderCredit = opts.base;
  const arrivals = new Map<number, number>(); // time → records
  const grants = new Map<number, number>(); // time → credit
  let buffered = 0;
  let consumedTotal = 0;
  let mark = 0;
  let maxWindow = account.limit;
  for (let now = 0; now < opts.ms; now++) {
    senderCredit += grants.get(now) ?? 0;
    grants.delete(now);
    if (senderCredit > 0) {
      arrivals.set(now + half, (arrivals.get(now + half) ?? 0) + senderCredit);
      senderCredit = 0;
    }
    const n = arrivals.get(now) ?? 0;
    arrivals.delete(now);
    for (let i = 0; i < n; i++) {
      expect(account.admit(CreditClass.Data)).toBe('ok');
      account.addBuffered(size);
    }
    buffered += n;
    if (n > 0) auto.arrived(now);
    const take = now % (opts.every ?? 1) === 0 ? Math.min(buffered, opts.rate) : 0;
    buffered -= take;
    consumedTotal += take;
    if (now === opts.ms - 1000) mark = consumedTotal;
    account.release(take, take * size);
    if (opts.auto !== false) {
      auto.consumed(take, take * size);
      account.resize(auto.retarget(now, opts.fill?.(now) ?? 0, Number.POSITIVE_INFINITY));
    }
    maxWindow = Math.max(maxWindow, account.limit);
    const starved = account.remaining === 0;
    const grant = account.takeGrant();
    if (grant > 0) {
      auto.granted(now, starved);
      grants.set(now + half, (grants.get(now + half) ?? 0) + grant);
    }
  }
  return { window: account.limit, lastSecond: consumedTotal - mark, maxWindow };
}

describe('AutoWindow: receive-window auto-tuning (pure)', () => {
  const big = 64 * 1024 * 1024;

  it('a static window caps a long-RTT stream at C per round trip', () => {
    const r = simulate({ base: 32, rtt: 50, rate: 20, ms: 4000, byteBudget: big, auto: false });
    expect(r.window).toBe(32);
    expect(r.lastSecond).toBeLessThanOrEqual(32 * 21);
  });

  it('grows toward the bandwidth-delay product and reaches the consumer rate', () => {
    // BDP = 20 records/ms × 50 ms = 1,000 records.
    const r = simulate({ base: 32, rtt: 50, rate: 20, ms: 4000, byteBudget: big });
    expect(r.window).toBeGreaterThanOrEqual(1000);
    expect(r.window).toBeLessThanOrEqual(4 * 1000);
    expect(r.lastSecond).toBeGreaterThanOrEqual(0.95 * 20 * 1000);
  });

  it('stays at C for a consumer that drains C more slowly than in two round trips', () => {
    // 0.25 records/ms: 32 records take 128 ms > 2 × 50 ms.
    const r = simulate({ base: 32, rtt: 50, rate: 1, every: 4, ms: 4000, byteBudget: big });
    expect(r.maxWindow).toBe(32);
  });

  it('grows a slow consumer only to about twice its own rate × RTT', () => {
    // 0.5 records/ms × 50 ms = 25 records; 32 drains in 64 ms < 100 ms, so one step (to 2·32 + 1), then 130 ms.
    const r = simulate({ base: 32, rtt: 50, rate: 1, every: 2, ms: 4000, byteBudget: big });
    expect(r.maxWindow).toBe(65);
  });

  it('never grows past the slot byte budget', () => {
    const r = simulate({ base: 32, rtt: 50, rate: 20, ms: 4000, byteBudget: 256 * 1024 });
    expect(r.maxWindow).toBe(256);
  });

  it('caps at half the peer window', () => {
    const w = new AutoWindow(8, 0, { byteBudget: big });
    w.consumed(8, 8 * 1000);
    expect(w.cap(100_000)).toBe(50);
    expect(w.cap(1000)).toBe(8); // never below C
  });

  it('shrinks back to C while the receive window is nearly full', () => {
    const r = simulate({
      base: 32,
      rtt: 50,
      rate: 20,
      ms: 6000,
      byteBudget: big,
      fill: (now) => (now < 3000 ? 0 : 0.9),
    });
    expect(r.maxWindow).toBeGreaterThanOrEqual(1000);
    expect(r.window).toBe(32);
  });

  it('does not grow without a round-trip sample a consumer that takes AUTO_FAST_EPOCH_MS or more per window', () => {
    const w = new AutoWindow(4, 0, { byteBudget: big });
    w.consumed(100, 100);
    expect(w.retarget(AUTO_FAST_EPOCH_MS, 0, Number.POSITIVE_INFINITY)).toBe(4);
  });

  it('doubles, round trip or not, a window its consumer drains in under AUTO_FAST_EPOCH_MS: half the grants for a fast stream', () => {
    const w = new AutoWindow(32, 0, { byteBudget: big });
    w.consumed(32, 32 * 64);
    // Leaving C takes it to 2C + 1 (the grant lifts the sender past C).
    expect(w.retarget(AUTO_FAST_EPOCH_MS / 2, 0, Number.POSITIVE_INFINITY)).toBe(65);
    w.consumed(65, 65 * 64);
    expect(w.retarget(AUTO_FAST_EPOCH_MS / 2 + AUTO_FAST_EPOCH_MS / 2, 0, Number.POSITIVE_INFINITY)).toBe(130);
    // Drained in AUTO_FAST_EPOCH_MS or more: it stays.
    w.consumed(130, 130 * 64);
    expect(w.retarget(AUTO_FAST_EPOCH_MS * 2, 0, Number.POSITIVE_INFINITY)).toBe(130);
    // Not while the receive window is half full.
    w.consumed(130, 130 * 64);
    expect(w.retarget(AUTO_FAST_EPOCH_MS * 2 + 1, 0.6, Number.POSITIVE_INFINITY)).toBe(130);
  });

  it('resize never takes back credit the sender holds', () => {
    const a = new ReceiverAccount(10);
    a.resize(40);
    expect(a.takeGrant()).toBe(30);
    for (let i = 0; i < 40; i++) a.admit(CreditClass.Data);
    a.release(5);
    expect(a.resize(10)).toBe(35); // only the 5 ungranted can go
    expect(a.takeGrant()).toBe(0);
    expect(a.remaining).toBe(0);
  });

  it('property: the window stays within C..budget, and the account admits only what it granted', () => {
    const op = fc.oneof(
      fc.record({ k: fc.constant('arrive' as const), n: fc.integer({ min: 0, max: 300 }) }),
      fc.record({
        k: fc.constant('consume' as const),
        n: fc.integer({ min: 0, max: 300 }),
        size: fc.integer({ min: 1, max: 70_000 }),
      }),
      fc.record({
        k: fc.constant('tick' as const),
        dt: fc.integer({ min: 0, max: 200 }),
        fill: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 4 * 1024 * 1024 }),
        fc.integer({ min: 1, max: 1 << 24 }),
        fc.array(op, { maxLength: 200 }),
        (base, byteBudget, peerBytes, ops) => {
          const account = new ReceiverAccount(base, { watermark: byteBudget });
          const auto = new AutoWindow(base, 0, { byteBudget });
          let now = 0;
          let senderCredit = base;
          let inFlight = 0;
          for (const o of ops) {
            if (o.k === 'arrive') {
              const n = Math.min(o.n, senderCredit);
              senderCredit -= n;
              inFlight += n;
              for (let i = 0; i < n; i++) expect(account.admit(CreditClass.Data)).toBe('ok');
              if (n > 0) auto.arrived(now);
            } else if (o.k === 'consume') {
              const n = Math.min(o.n, account.dataOutstanding);
              account.release(n, n * o.size);
              inFlight -= n;
              auto.consumed(n, n * o.size);
            } else {
              now += o.dt;
              const w = auto.retarget(now, o.fill, peerBytes);
              expect(w).toBeGreaterThanOrEqual(base);
              if (w > base) {
                expect(w * Math.max(1, auto.recordBytes)).toBeLessThanOrEqual(byteBudget);
                expect(w * Math.max(1, auto.recordBytes)).toBeLessThanOrEqual(peerBytes / 2);
              }
              account.resize(w);
              const starved = account.remaining === 0;
              const g = account.takeGrant();
              if (g > 0) auto.granted(now, starved);
              senderCredit += g;
            }
            // Conservation: what the sender holds plus what is unread plus what is owed is the window.
            expect(senderCredit + inFlight + account.ungranted).toBe(account.limit);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('AutoWindow: the first step above C is one a sender can see', () => {
  /** An AutoWindow at `base` with a 10 ms round-trip sample, its consumer having drained one whole window fast. */
  const drainedFast = (base: number, byteBudget: number): { auto: AutoWindow; target: number } => {
    const auto = new AutoWindow(base, 0, { byteBudget });
    auto.granted(0, true);
    auto.arrived(10);
    auto.consumed(base, base * 10);
    return { auto, target: auto.retarget(12, 0, Number.POSITIVE_INFINITY) };
  };

  it('leaves C by more than C records (to 2C + 1), so the grant lifts the sender past C', () => {
    const { target } = drainedFast(4, 1 << 20);
    expect(target).toBe(9);
    const account = new ReceiverAccount(4);
    const ledger = new SenderLedger(4);
    // The sender spent all 4, the consumer read them: the grant is 4 read plus 5 of growth.
    for (let i = 0; i < 4; i++) {
      ledger.spendData();
      account.admit(CreditClass.Data);
    }
    account.release(4, 40);
    account.resize(target);
    ledger.grant(account.takeGrant());
    expect(ledger.peak).toBeGreaterThan(4);
  });

  it('stays at C when its caps allow no more than 2C', () => {
    // 10-byte records and an 80-byte budget: a cap of 8 records = 2C.
    expect(drainedFast(4, 80).target).toBe(4);
    // A cap of 9 records allows the step.
    expect(drainedFast(4, 90).target).toBe(9);
  });

  it("a static receiver's grants never lift a sender's peak credit above C", () => {
    const ledger = new SenderLedger(3);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 3; i++) ledger.spendData();
      ledger.grant(3);
    }
    expect(ledger.peak).toBe(3);
    ledger.grant(1);
    expect(ledger.peak).toBe(4);
  });
});
