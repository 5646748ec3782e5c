/**
 * The credit behaviours: one test per statement, named with its id (CREDIT-01..29).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LanemuxError } from '../../src/errors.ts';
import { RecordType } from '../../src/wire/constants.ts';
import {
  ByteBudget,
  CreditClass,
  CreditError,
  DEFAULT_INITIAL_CREDIT,
  DEFAULT_PEER_BYTE_BUDGET,
  DEFAULT_SLOT_BYTE_BUDGET,
  MAX_CREDIT,
  ReceiverAccount,
  SenderLedger,
  classify,
  creditErrorOf,
  occupiesBuffer,
  releasePair,
  reservePair,
  resolveLimits,
} from '../../src/credit/index.ts';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('B. Credit ledgers and byte budgets', () => {
  it('CREDIT-01 limits read from the wire with initial_credit 0 fail with a legacy-peer error, whatever the budget', () => {
    for (const slotByteBudget of [0, 1, 4096, DEFAULT_SLOT_BYTE_BUDGET, 2 ** 40]) {
      const error = thrown(() => resolveLimits({ initialCredit: 0, slotByteBudget }));
      expect(error).toBeInstanceOf(CreditError);
      expect(error).toBeInstanceOf(LanemuxError);
      expect((error as CreditError).code).toBe('ERR_INITIAL_CREDIT_ZERO');
      expect((error as CreditError).message).toContain('initial_credit = 0');
      expect((error as CreditError).message).toContain('legacy');
      expect((error as CreditError).message).toContain('messenger-mux-v2');
    }
    expect(() => resolveLimits({ initialCredit: 0, slotByteBudget: 0 }, { transportKey: 'my-key' })).toThrow(
      /my-key.*initial_credit = 0/,
    );
  });

  it('CREDIT-02 slot_byte_budget 0 from the wire resolves to 1,048,576', () => {
    expect(resolveLimits({ initialCredit: 32, slotByteBudget: 0 })).toEqual({
      initialCredit: 32,
      slotByteBudget: 1_048_576,
    });
    expect(resolveLimits({ initialCredit: 1, slotByteBudget: 0 }).slotByteBudget).toBe(1_048_576);
  });

  it('CREDIT-03 non-zero advertised limits pass through unchanged', () => {
    const cases = [
      { initialCredit: 1, slotByteBudget: 1 },
      { initialCredit: 32, slotByteBudget: 256 },
      { initialCredit: 256, slotByteBudget: 1_048_577 },
      { initialCredit: 7, slotByteBudget: 3 * 1_048_576 },
      { initialCredit: MAX_CREDIT, slotByteBudget: 2 ** 40 },
    ];
    for (const limits of cases) expect(resolveLimits(limits)).toEqual(limits);
  });

  it('CREDIT-04 default budgets: peer 8 MiB (8,388,608), slot 1 MiB (1,048,576)', () => {
    expect(DEFAULT_PEER_BYTE_BUDGET).toBe(8_388_608);
    expect(DEFAULT_SLOT_BYTE_BUDGET).toBe(1_048_576);
    expect(DEFAULT_INITIAL_CREDIT).toBe(32);
    expect(MAX_CREDIT).toBe(2 ** 32 - 1);
  });

  it('CREDIT-05 classification: control types → Control, terminal Data → Terminal, other Data and SlotHeartbeat → Data', () => {
    for (const terminal of [false, true]) {
      expect(classify(RecordType.OpenSlot, terminal)).toBe(CreditClass.Control);
      expect(classify(RecordType.CloseSlot, terminal)).toBe(CreditClass.Control);
      expect(classify(RecordType.CreditUpdate, terminal)).toBe(CreditClass.Control);
      expect(classify(RecordType.LifecycleSlot, terminal)).toBe(CreditClass.Control);
      expect(classify(RecordType.SlotHeartbeat, terminal)).toBe(CreditClass.Data);
    }
    expect(classify(RecordType.Data, true)).toBe(CreditClass.Terminal);
    expect(classify(RecordType.Data, false)).toBe(CreditClass.Data);
    expect(() => classify(6, false)).toThrow(CreditError);
  });

  it('CREDIT-06 only Control records stay out of the slot buffer; Data and Terminal occupy it', () => {
    expect(occupiesBuffer(CreditClass.Control)).toBe(false);
    expect(occupiesBuffer(CreditClass.Data)).toBe(true);
    expect(occupiesBuffer(CreditClass.Terminal)).toBe(true);
    const account = new ReceiverAccount(4);
    account.admit(CreditClass.Control);
    expect(account.occupancy).toBe(0);
    account.admit(CreditClass.Data);
    expect(account.occupancy).toBe(1);
    account.admit(CreditClass.Terminal);
    expect(account.occupancy).toBe(2);
  });

  it('CREDIT-07 a sender ledger opened with C allows exactly C data spends; the next fails with DataExhausted', () => {
    for (const c of [1, 5, 32]) {
      const ledger = new SenderLedger(c);
      for (let i = 0; i < c; i++) expect(ledger.spendData()).toBe('ok');
      expect(ledger.spendData()).toBe('DataExhausted');
      expect(ledger.spend(CreditClass.Data)).toBe('DataExhausted');
      expect(ledger.dataAvailable).toBe(0);
    }
  });

  it('CREDIT-08 a ledger with zero data credit can still send control records and a terminal', () => {
    const opened = new SenderLedger(0);
    expect(opened.spendData()).toBe('DataExhausted');
    expect(opened.spend(CreditClass.Control)).toBe('ok');
    expect(opened.spend(CreditClass.Terminal)).toBe('ok');
    const exhausted = new SenderLedger(3);
    for (let i = 0; i < 3; i++) exhausted.spendData();
    expect(exhausted.canSpend(CreditClass.Data)).toBe(false);
    expect(exhausted.canSpend(CreditClass.Control)).toBe(true);
    expect(exhausted.spend(CreditClass.Control)).toBe('ok');
    expect(exhausted.spendTerminal()).toBe('ok');
  });

  it('CREDIT-09 control records are never blocked: 10,000 at zero credit', () => {
    const ledger = new SenderLedger(0);
    for (let i = 0; i < 10_000; i++) expect(ledger.spend(CreditClass.Control)).toBe('ok');
    expect(ledger.dataAvailable).toBe(0);
    expect(ledger.terminalAvailable).toBe(true);
  });

  it('CREDIT-10 the terminal reserve is spent exactly once; a second terminal fails with TerminalAlreadySpent', () => {
    const ledger = new SenderLedger(2);
    expect(ledger.spendTerminal()).toBe('ok');
    expect(ledger.terminalAvailable).toBe(false);
    expect(ledger.spendTerminal()).toBe('TerminalAlreadySpent');
    expect(ledger.spend(CreditClass.Terminal)).toBe('TerminalAlreadySpent');
    expect(ledger.dataAvailable).toBe(2); // the reserve is apart from data credit
    const error = creditErrorOf('TerminalAlreadySpent');
    expect(error.code).toBe('ERR_TERMINAL_ALREADY_SPENT');
  });

  it('CREDIT-11 after exhaustion, a CreditUpdate of n allows exactly n more data spends', () => {
    for (const n of [1, 3, 7]) {
      const ledger = new SenderLedger(2);
      ledger.spendData();
      ledger.spendData();
      expect(ledger.spendData()).toBe('DataExhausted');
      expect(ledger.grant(n)).toBe(n);
      for (let i = 0; i < n; i++) expect(ledger.spendData()).toBe('ok');
      expect(ledger.spendData()).toBe('DataExhausted');
    }
  });

  it('CREDIT-12 grants saturate at 2^32−1 and never wrap', () => {
    const ledger = new SenderLedger(2 ** 32 - 2);
    expect(ledger.grant(2)).toBe(2 ** 32 - 1);
    expect(ledger.grant(MAX_CREDIT)).toBe(MAX_CREDIT);
    expect(ledger.spendData()).toBe('ok');
    expect(ledger.dataAvailable).toBe(MAX_CREDIT - 1);
    const fromZero = new SenderLedger(0);
    fromZero.grant(MAX_CREDIT);
    expect(fromZero.grant(1)).toBe(MAX_CREDIT);
  });

  it('CREDIT-13 on the receiving account, a (C+1)-th data record admitted before any release fails with DataExhausted', () => {
    for (const c of [1, 4, 32]) {
      const account = new ReceiverAccount(c);
      for (let i = 0; i < c; i++) expect(account.admit(CreditClass.Data)).toBe('ok');
      expect(account.admit(CreditClass.Data)).toBe('DataExhausted');
      expect(account.dataOutstanding).toBe(c);
    }
  });

  it('CREDIT-14 the receiving account admits control records without using buffer space', () => {
    const account = new ReceiverAccount(2);
    for (let i = 0; i < 1_000; i++) expect(account.admit(CreditClass.Control)).toBe('ok');
    expect(account.occupancy).toBe(0);
    expect(account.remaining).toBe(2);
    expect(account.admit(CreditClass.Data)).toBe('ok');
    expect(account.admit(CreditClass.Data)).toBe('ok');
    expect(account.admit(CreditClass.Control)).toBe('ok');
    expect(account.admit(CreditClass.Data)).toBe('DataExhausted');
  });

  it('CREDIT-15 a slot holding C data records still admits its terminal: C + 1 equals the buffer depth', () => {
    const account = new ReceiverAccount(3);
    for (let i = 0; i < 3; i++) account.admit(CreditClass.Data);
    expect(account.admit(CreditClass.Terminal)).toBe('ok');
    expect(account.occupancy).toBe(4);
    expect(account.occupancy).toBe(account.depth);
  });

  it('CREDIT-16 draining k data records accrues k credit to advertise', () => {
    const account = new ReceiverAccount(8);
    for (let i = 0; i < 5; i++) account.admit(CreditClass.Data);
    expect(account.release(3)).toBe(3);
    expect(account.ungranted).toBe(3);
    expect(account.takeGrant()).toBe(3);
    expect(account.ungranted).toBe(0);
    expect(account.takeGrant()).toBe(0);
    expect(account.release(2)).toBe(2);
    expect(account.takeGrant()).toBe(2);
  });

  it('CREDIT-17 draining the terminal accrues no credit', () => {
    const only = new ReceiverAccount(4);
    only.admit(CreditClass.Terminal);
    expect(only.release(1)).toBe(0);
    expect(only.ungranted).toBe(0);
    expect(only.occupancy).toBe(0);
    const mixed = new ReceiverAccount(4);
    mixed.admit(CreditClass.Data);
    mixed.admit(CreditClass.Data);
    mixed.admit(CreditClass.Terminal);
    expect(mixed.release(3)).toBe(2);
    expect(mixed.takeGrant()).toBe(2);
    expect(mixed.occupancy).toBe(0);
  });

  it('CREDIT-18 releasing more than was admitted is clamped; credit never exceeds what was admitted', () => {
    const account = new ReceiverAccount(8);
    account.admit(CreditClass.Data);
    account.admit(CreditClass.Data);
    expect(account.release(5)).toBe(2);
    expect(account.dataOutstanding).toBe(0);
    expect(account.release(1)).toBe(0);
    expect(account.takeGrant()).toBe(2);
    expect(account.remaining).toBe(8);
  });

  it('CREDIT-19 the slot buffer depth is C+1', () => {
    for (const c of [0, 1, 4, 32, MAX_CREDIT]) expect(new ReceiverAccount(c).depth).toBe(c + 1);
    const account = new ReceiverAccount(2);
    account.admit(CreditClass.Data);
    account.admit(CreditClass.Data);
    account.admit(CreditClass.Terminal);
    expect(account.admit(CreditClass.Data)).toBe('DataExhausted');
    expect(account.admit(CreditClass.Terminal)).toBe('TerminalAlreadySpent');
    expect(account.occupancy).toBe(3);
  });

  it('CREDIT-20 under randomized admit/release sequences, occupancy never exceeds C+1 (property)', () => {
    const op = fc.oneof(
      fc
        .constantFrom(CreditClass.Data, CreditClass.Terminal, CreditClass.Control)
        .map((cls) => ({ kind: 'admit' as const, cls })),
      fc.integer({ min: 0, max: 6 }).map((k) => ({ kind: 'release' as const, k })),
      fc.constant({ kind: 'grant' as const }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 12 }), fc.array(op, { maxLength: 200 }), (c, ops) => {
        const account = new ReceiverAccount(c);
        let admitted = 0;
        let credited = 0;
        for (const o of ops) {
          if (o.kind === 'admit') {
            if (account.admit(o.cls) === 'ok' && o.cls === CreditClass.Data) admitted += 1;
          } else if (o.kind === 'release') credited += account.release(o.k);
          else account.takeGrant();
          expect(account.occupancy).toBeLessThanOrEqual(c + 1);
          expect(account.dataOutstanding).toBeLessThanOrEqual(c);
          expect(credited).toBeLessThanOrEqual(admitted);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('CREDIT-21 a sender ledger and a receiving account with the same C agree: everything the sender may send is admitted', () => {
    const op = fc.constantFrom('send', 'terminal', 'control', 'deliver', 'consume', 'reconcile', 'grant');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 16 }), fc.array(op, { maxLength: 300 }), (c, ops) => {
        const ledger = new SenderLedger(c);
        const account = new ReceiverAccount(c);
        const records: CreditClass[] = []; // in flight, in order
        const grants: number[] = []; // CreditUpdates in flight
        let buffered = 0;
        for (const o of ops) {
          switch (o) {
            case 'send':
              if (ledger.spend(CreditClass.Data) === 'ok') records.push(CreditClass.Data);
              break;
            case 'terminal':
              if (ledger.spend(CreditClass.Terminal) === 'ok') records.push(CreditClass.Terminal);
              break;
            case 'control':
              expect(ledger.spend(CreditClass.Control)).toBe('ok');
              records.push(CreditClass.Control);
              break;
            case 'deliver': {
              const cls = records.shift();
              if (cls === undefined) break;
              expect(account.admit(cls)).toBe('ok');
              if (occupiesBuffer(cls)) buffered += 1;
              break;
            }
            case 'consume':
              if (buffered > 0) {
                buffered -= 1;
                account.release(1);
              }
              break;
            case 'reconcile': {
              const grant = account.takeGrant();
              if (grant > 0) grants.push(grant);
              break;
            }
            case 'grant': {
              const grant = grants.shift();
              if (grant !== undefined) ledger.grant(grant);
              break;
            }
          }
          expect(account.occupancy).toBeLessThanOrEqual(account.depth);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('CREDIT-22 byte reservations add up, and releasing them returns usage to 0', () => {
    const budget = new ByteBudget(100);
    expect(budget.reserve(10)).toBe('ok');
    expect(budget.reserve(20)).toBe('ok');
    expect(budget.reserve(30)).toBe('ok');
    expect(budget.used).toBe(60);
    expect(budget.free).toBe(40);
    budget.release(10);
    budget.release(20);
    budget.release(30);
    expect(budget.used).toBe(0);
  });

  it('CREDIT-23 a reservation that fits the budget but not the current free space fails as transient (Exhausted)', () => {
    const budget = new ByteBudget(100);
    expect(budget.reserve(80)).toBe('ok');
    expect(budget.reserve(30)).toBe('Exhausted');
    expect(budget.used).toBe(80);
    budget.release(10);
    expect(budget.reserve(30)).toBe('ok');
    const error = creditErrorOf('Exhausted');
    expect([error.code, error.retryable]).toEqual(['ERR_BUDGET_EXHAUSTED', true]);
  });

  it('CREDIT-24 a reservation larger than the whole budget fails as permanent (ExceedsBudget)', () => {
    const budget = new ByteBudget(100);
    expect(budget.reserve(101)).toBe('ExceedsBudget');
    expect(budget.used).toBe(0);
    expect(budget.reserve(100)).toBe('ok');
    expect(budget.reserve(101)).toBe('ExceedsBudget');
    const error = creditErrorOf('ExceedsBudget');
    expect([error.code, error.retryable]).toEqual(['ERR_EXCEEDS_BUDGET', false]);
  });

  it('CREDIT-25 over-releasing cannot drive usage below 0', () => {
    const budget = new ByteBudget(100);
    budget.reserve(10);
    budget.release(50);
    expect(budget.used).toBe(0);
    budget.release(1);
    expect(budget.used).toBe(0);
    expect(budget.reserve(100)).toBe('ok');
    expect(budget.reserve(1)).toBe('Exhausted');
  });

  it('CREDIT-26 a paired (slot + peer) reservation that the peer refuses rolls the slot reservation back', () => {
    const slot = new ByteBudget(100);
    const peer = new ByteBudget(50);
    peer.reserve(40);
    expect(reservePair(slot, peer, 20)).toBe('Exhausted');
    expect(slot.used).toBe(0);
    expect(peer.used).toBe(40);
    const small = new ByteBudget(10);
    expect(reservePair(new ByteBudget(100), small, 20)).toBe('ExceedsBudget');
  });

  it('CREDIT-27 a paired reservation that the slot refuses leaves the peer budget untouched', () => {
    const slot = new ByteBudget(10);
    const peer = new ByteBudget(1_000);
    expect(reservePair(slot, peer, 20)).toBe('ExceedsBudget');
    expect(peer.used).toBe(0);
    slot.reserve(8);
    expect(reservePair(slot, peer, 5)).toBe('Exhausted');
    expect(peer.used).toBe(0);
    expect(slot.used).toBe(8);
  });

  it('CREDIT-28 releasing a pair returns the bytes to both scopes', () => {
    const slot = new ByteBudget(100);
    const peer = new ByteBudget(1_000);
    expect(reservePair(slot, peer, 60)).toBe('ok');
    expect([slot.used, peer.used]).toEqual([60, 60]);
    releasePair(slot, peer, 60);
    expect([slot.used, peer.used]).toEqual([0, 0]);
  });

  it('CREDIT-29 many slots, each within its slot budget, together never exceed the peer budget (property)', () => {
    const op = fc.record({ slot: fc.nat(), bytes: fc.integer({ min: 0, max: 300 }), release: fc.boolean() });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 1, max: 256 }),
        fc.integer({ min: 1, max: 1_024 }),
        fc.array(op, { maxLength: 300 }),
        (slotCount, slotCap, peerCap, ops) => {
          const peer = new ByteBudget(peerCap);
          const slots = Array.from({ length: slotCount }, () => new ByteBudget(slotCap));
          const held: number[][] = slots.map(() => []);
          for (const o of ops) {
            const i = o.slot % slotCount;
            const slot = slots[i]!;
            if (o.release) {
              const bytes = held[i]!.pop();
              if (bytes !== undefined) releasePair(slot, peer, bytes);
            } else if (reservePair(slot, peer, o.bytes) === 'ok') held[i]!.push(o.bytes);
            const total = slots.reduce((sum, s) => sum + s.used, 0);
            expect(peer.used).toBeLessThanOrEqual(peerCap);
            expect(total).toBe(peer.used);
            for (const s of slots) expect(s.used).toBeLessThanOrEqual(slotCap);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
