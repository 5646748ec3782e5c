/** Sender ledger, receiver account and errors beyond the CREDIT-xx statements. */
import { describe, expect, it } from 'vitest';
import {
  CreditClass,
  CreditError,
  ReceiverAccount,
  SenderLedger,
  creditErrorOf,
  creditViolation,
} from '../../src/credit/index.ts';
import { LanemuxError, isLanemuxError } from '../../src/errors.ts';

describe('ReceiverAccount', () => {
  it('admits data only within the granted window: credit released but not yet granted cannot be spent', () => {
    const account = new ReceiverAccount(2);
    account.admit(CreditClass.Data);
    account.admit(CreditClass.Data);
    account.release(1);
    expect(account.remaining).toBe(0);
    expect(account.admit(CreditClass.Data)).toBe('DataExhausted'); // the sender was never told
    expect(account.takeGrant()).toBe(1);
    expect(account.remaining).toBe(1);
    expect(account.admit(CreditClass.Data)).toBe('ok');
  });

  it('withholds grants while buffered bytes are at or above the watermark, then grants the whole backlog', () => {
    const account = new ReceiverAccount(4, { watermark: 1 });
    for (let i = 0; i < 2; i++) {
      account.admit(CreditClass.Data);
      account.addBuffered(5);
    }
    expect(account.release(1, 5)).toBe(1);
    expect(account.takeGrant()).toBe(0); // 5 bytes still buffered ≥ 1
    expect(account.ungranted).toBe(1);
    expect(account.release(1, 5)).toBe(1);
    expect(account.bufferedBytes).toBe(0);
    expect(account.takeGrant()).toBe(2); // a single grant of 2
  });

  it('the watermark is inclusive and defaults to the slot byte budget', () => {
    const account = new ReceiverAccount(4);
    expect(account.watermark).toBe(1_048_576);
    account.admit(CreditClass.Data);
    account.addBuffered(1_048_576);
    account.admit(CreditClass.Data);
    account.addBuffered(1);
    account.release(1, 1);
    expect(account.takeGrant()).toBe(0);
    account.release(1, 1);
    expect(account.takeGrant()).toBe(2);
  });

  it('releasing bytes never drives the buffered count below 0', () => {
    const account = new ReceiverAccount(4);
    account.admit(CreditClass.Data);
    account.addBuffered(3);
    account.release(1, 10);
    expect(account.bufferedBytes).toBe(0);
  });

  it('refuses invalid construction and counts', () => {
    expect(() => new ReceiverAccount(4, { watermark: 0 })).toThrow(/watermark/);
    expect(() => new ReceiverAccount(-1)).toThrow(CreditError);
    expect(() => new ReceiverAccount(2 ** 32)).toThrow(/exceeds/);
    expect(() => new ReceiverAccount(4).release(-1)).toThrow(CreditError);
    expect(() => new ReceiverAccount(4).addBuffered(0.5)).toThrow(CreditError);
  });
});

describe('SenderLedger', () => {
  it('refuses invalid initial credit and grants', () => {
    expect(() => new SenderLedger(2 ** 32)).toThrow(/exceeds/);
    expect(() => new SenderLedger(-1)).toThrow(CreditError);
    expect(() => new SenderLedger(1).grant(-1)).toThrow(CreditError);
  });

  it('a zero grant changes nothing', () => {
    const ledger = new SenderLedger(0);
    expect(ledger.grant(0)).toBe(0);
    expect(ledger.spendData()).toBe('DataExhausted');
  });

  it('canSpend answers without spending', () => {
    const ledger = new SenderLedger(1);
    expect(ledger.canSpend(CreditClass.Data)).toBe(true);
    expect(ledger.canSpend(CreditClass.Terminal)).toBe(true);
    expect(ledger.dataAvailable).toBe(1);
    expect(ledger.terminalAvailable).toBe(true);
  });
});

describe('credit errors', () => {
  it('map each failure kind to a stable code and retryable hint', () => {
    const cases = [
      ['DataExhausted', 'ERR_CREDIT_EXHAUSTED', true],
      ['TerminalAlreadySpent', 'ERR_TERMINAL_ALREADY_SPENT', false],
      ['Exhausted', 'ERR_BUDGET_EXHAUSTED', true],
      ['ExceedsBudget', 'ERR_EXCEEDS_BUDGET', false],
    ] as const;
    for (const [kind, code, retryable] of cases) {
      const error = creditErrorOf(kind, 'slot 7');
      expect(error).toBeInstanceOf(CreditError);
      expect(isLanemuxError(error, code)).toBe(true);
      expect(error.retryable).toBe(retryable);
      expect(error.message).toContain('slot 7');
      expect(error.name).toBe('CreditError');
    }
  });

  it('a credit violation is ERR_CREDIT_VIOLATION and names what was overspent', () => {
    expect(creditViolation('DataExhausted')).toMatchObject({ code: 'ERR_CREDIT_VIOLATION', retryable: false });
    expect(creditViolation('TerminalAlreadySpent').message).toContain('second terminal');
    expect(creditViolation('window', 'stream s1').message).toContain('stream s1');
    expect(creditViolation('window')).toBeInstanceOf(LanemuxError);
  });
});
