import { describe, expect, it } from 'vitest';
import {
  CreditError,
  CreditGate,
  CreditClosed,
  CreditRouter,
  grantTarget,
  grantTargetIndex,
  negotiate,
  negotiateInitialCredit,
  resolveLimits,
} from '../../src/credit/index.ts';
import type { StreamKey } from '../../src/credit/index.ts';

describe('negotiate', () => {
  it('takes the smaller proposal and refuses zero', () => {
    expect(negotiate(32, 16)).toBe(16);
    expect(negotiate(0, 32)).toBeNull();
    expect(negotiate(32, 0)).toBeNull();
    expect(negotiate(1, 1)).toBe(1);
    expect(negotiate(16, 32)).toBe(16);
  });

  it('negotiateInitialCredit fails a zero window with an error naming initial_credit', () => {
    expect(negotiateInitialCredit(32, 16)).toBe(16);
    for (const [ours, theirs] of [
      [0, 32],
      [32, 0],
      [0, 0],
    ] as const) {
      expect(() => negotiateInitialCredit(ours, theirs)).toThrow(CreditError);
      expect(() => negotiateInitialCredit(ours, theirs)).toThrow(/initial_credit = 0/);
      try {
        negotiateInitialCredit(ours, theirs);
      } catch (error) {
        expect((error as CreditError).code).toBe('ERR_INITIAL_CREDIT_ZERO');
      }
    }
  });

  it('resolveLimits refuses values that are not naturals, and C above 2^32−1', () => {
    expect(() => resolveLimits({ initialCredit: -1, slotByteBudget: 0 })).toThrow(/initial_credit/);
    expect(() => resolveLimits({ initialCredit: 1.5, slotByteBudget: 0 })).toThrow(CreditError);
    expect(() => resolveLimits({ initialCredit: 32, slotByteBudget: -5 })).toThrow(/slot_byte_budget/);
    expect(() => resolveLimits({ initialCredit: 2 ** 32, slotByteBudget: 0 })).toThrow(/exceeds/);
  });
});

describe('grantTarget', () => {
  const table: Array<[streams: StreamKey[], named: StreamKey, result: StreamKey | undefined]> = [
    [['s1'], null, 's1'],
    [['s1', 's2'], null, undefined],
    [['s1'], 's9', undefined],
    [[null], null, null],
    [['s1', 's2'], 's2', 's2'],
    // Beyond the reference table:
    [[], null, undefined],
    [[null, 's1'], null, null], // none equals none, even with two streams
    [[null], 's1', undefined],
    [['s1'], '', undefined], // the empty string is not "no stream"
    [[''], null, ''],
  ];
  for (const [streams, named, result] of table) {
    it(`streams ${JSON.stringify(streams)}, named ${JSON.stringify(named)} → ${result === undefined ? 'none' : JSON.stringify(result)}`, () => {
      expect(grantTarget(streams, named)).toBe(result);
      expect(grantTargetIndex(streams, named)).toBe(result === undefined ? -1 : streams.indexOf(result));
    });
  }
});

describe('CreditRouter', () => {
  it('routes a grant only among the gates of the named request', () => {
    const router = new CreditRouter<number>();
    const mine = new CreditGate(0);
    const other = new CreditGate(0);
    router.register(7, 's1', mine);
    router.register(8, 's1', other);
    expect(router.route(7, 's1', 3)).toBe(true);
    expect([mine.available, other.available]).toEqual([3, 0]);
    expect(router.route(7, null, 2)).toBe(true); // the request's only stream
    expect(mine.available).toBe(5);
    expect(router.route(9, 's1', 1)).toBe(false);
  });

  it('closeRequest removes and closes every gate of the request; its waiters get CreditClosed(reason)', async () => {
    const router = new CreditRouter<string>();
    const a = new CreditGate(0);
    const b = new CreditGate(0);
    const survivor = new CreditGate(0);
    router.register('r', 'a', a);
    router.register('r', 'b', b);
    router.register('q', null, survivor);
    const waiting = [a.acquire(1), b.acquire(1)];
    expect(router.closeRequest('r', 'END')).toBe(2);
    for (const w of waiting) await expect(w).rejects.toEqual(expect.objectContaining({ reason: 'END' }));
    await expect(a.acquire(1)).rejects.toBeInstanceOf(CreditClosed);
    expect(survivor.closed).toBeNull();
    expect(router.route('r', 'a', 1)).toBe(false);
    expect(router.closeRequest('r', 'END')).toBe(0);
    expect(router.size).toBe(1);
  });

  it('refuses a second gate under the same (request, stream), keeping null and "" distinct', () => {
    const router = new CreditRouter<number>();
    router.register(1, null, new CreditGate(0));
    router.register(1, '', new CreditGate(0));
    expect(() => router.register(1, null, new CreditGate(0))).toThrow(CreditError);
    expect(() => router.register(1, '', new CreditGate(0))).toThrow(/already registered/);
  });
});
