import { describe, expect, it } from 'vitest';
import * as credit from '../../src/credit/index.ts';

describe('lanemux/credit public surface', () => {
  it('exports exactly the documented runtime names', () => {
    expect(Object.keys(credit).sort()).toEqual(
      [
        'AUTO_GROW_FILL',
        'AUTO_SHRINK_FILL',
        'Acquire',
        'Arrival',
        'AutoWindow',
        'DEFAULT_AUTO_MAX_RECORDS',
        'BudgetOutcome',
        'ByteBudget',
        'CreditClass',
        'CreditClosed',
        'CreditError',
        'CreditGate',
        'CreditOutcome',
        'CreditRouter',
        'DEFAULT_INITIAL_CREDIT',
        'DEFAULT_PEER_BYTE_BUDGET',
        'DEFAULT_SLOT_BYTE_BUDGET',
        'Gate',
        'MAX_CREDIT',
        'ReceiverAccount',
        'SenderLedger',
        'Window',
        'batchFor',
        'classify',
        'creditErrorOf',
        'creditViolation',
        'grantTarget',
        'grantTargetIndex',
        'negotiate',
        'negotiateInitialCredit',
        'occupiesBuffer',
        'releasePair',
        'reservePair',
        'resolveLimits',
      ].sort(),
    );
  });

  it('outcome and class constants are frozen-shape string literals', () => {
    expect(credit.CreditOutcome).toEqual({
      Ok: 'ok',
      DataExhausted: 'DataExhausted',
      TerminalAlreadySpent: 'TerminalAlreadySpent',
    });
    expect(credit.BudgetOutcome).toEqual({ Ok: 'ok', Exhausted: 'Exhausted', ExceedsBudget: 'ExceedsBudget' });
    expect(credit.CreditClass).toEqual({ Control: 'Control', Terminal: 'Terminal', Data: 'Data' });
    expect(credit.Acquire).toEqual({ Acquired: 'acquired', Wait: 'wait', Closed: 'closed' });
    expect(credit.Arrival).toEqual({ Accepted: 'accepted', Violation: 'violation' });
  });
});
