/**
 * Errors of the credit layer. All extend {@link LanemuxError}; `code` is the contract.
 */
import { LanemuxError } from '../errors.ts';
import type { LanemuxErrorOptions } from '../errors.ts';
import type { CreditFailure } from './outcome.ts';

/** Stable codes of credit errors. */
export type CreditErrorCode =
  /** A sender spent a data record with no data credit left (retryable: a grant will come). */
  | 'ERR_CREDIT_EXHAUSTED'
  /** A second terminal on one slot: the terminal reserve is spent once. */
  | 'ERR_TERMINAL_ALREADY_SPENT'
  /** The credit gate was closed; carries the first close reason. */
  | 'ERR_CREDIT_CLOSED'
  /** The peer sent beyond its granted window (wire: `CloseSlot{ProtocolError}`, docs/protocol.md §10.3). */
  | 'ERR_CREDIT_VIOLATION'
  /** The peer advertised `initial_credit = 0`: a legacy peer, not offering the mux (docs/protocol.md §8). */
  | 'ERR_INITIAL_CREDIT_ZERO'
  /** A byte reservation does not fit the free space right now (retryable). */
  | 'ERR_BUDGET_EXHAUSTED'
  /** A byte reservation is larger than the whole budget (permanent). */
  | 'ERR_EXCEEDS_BUDGET'
  /** A programmer error: a count that is not a safe natural number, or a misuse of the API. */
  | 'ERR_INVALID_ARGUMENT';

/** An error raised or reported by the credit layer. */
export class CreditError extends LanemuxError<CreditErrorCode> {}

/**
 * Rejection of a credit waiter whose gate closed. Every waiter of a
 * gate, and every later acquire, gets the **first** close reason.
 */
export class CreditClosed extends CreditError {
  /** The first reason the gate was closed with, e.g. `"END"`. */
  readonly reason: string;

  constructor(reason: string, options: LanemuxErrorOptions = {}) {
    super('ERR_CREDIT_CLOSED', `credit gate closed: ${reason}`, options);
    this.reason = reason;
  }
}

/**
 * The error for a failure kind answered by a ledger or budget, for callers that report it.
 *
 * @param kind - the outcome that was not `ok`.
 * @param detail - optional context appended to the message (e.g. the slot).
 */
export function creditErrorOf(kind: CreditFailure, detail?: string): CreditError {
  const suffix = detail === undefined ? '' : ` (${detail})`;
  switch (kind) {
    case 'DataExhausted':
      return new CreditError('ERR_CREDIT_EXHAUSTED', `no data credit left; wait for a CreditUpdate${suffix}`, {
        retryable: true,
      });
    case 'TerminalAlreadySpent':
      return new CreditError('ERR_TERMINAL_ALREADY_SPENT', `the terminal reserve was already spent${suffix}`);
    case 'Exhausted':
      return new CreditError('ERR_BUDGET_EXHAUSTED', `byte budget exhausted for now${suffix}`, { retryable: true });
    case 'ExceedsBudget':
      return new CreditError('ERR_EXCEEDS_BUDGET', `reservation exceeds the whole byte budget${suffix}`);
  }
}

/**
 * A credit violation: the peer sent a record its window did not allow. The mux answers it
 * with `CloseSlot{ProtocolError}` for that slot only; other slots continue.
 *
 * @param kind - what the receiving account answered (`DataExhausted` or `TerminalAlreadySpent`), or `window`.
 * @param detail - optional context appended to the message.
 */
export function creditViolation(
  kind: 'DataExhausted' | 'TerminalAlreadySpent' | 'window',
  detail?: string,
): CreditError {
  const what =
    kind === 'DataExhausted'
      ? 'a data record beyond the granted window'
      : kind === 'TerminalAlreadySpent'
        ? 'a second terminal'
        : 'a record beyond the granted window';
  return new CreditError(
    'ERR_CREDIT_VIOLATION',
    `credit violation: peer sent ${what}${detail === undefined ? '' : ` (${detail})`}`,
  );
}
