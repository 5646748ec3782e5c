/**
 * Allocation-free answers of the credit ledgers. The hot path (spend, admit) answers with one of these string
 * literals instead of throwing or allocating; the caller turns a failure into an error only when it reports one
 * (see `creditErrorOf`).
 */

/** Answer of a sender spend or a receiver admission. */
export const CreditOutcome = {
  /** The record may go (sender) or was admitted (receiver). */
  Ok: 'ok',
  /** No data credit is left: the sender must wait for a grant; on the receiver it is an overspend. */
  DataExhausted: 'DataExhausted',
  /** The one terminal reserve of the slot was already used. */
  TerminalAlreadySpent: 'TerminalAlreadySpent',
} as const;
/** Answer of a sender spend or a receiver admission. */
export type CreditOutcome = (typeof CreditOutcome)[keyof typeof CreditOutcome];

/** Answer of a byte reservation. */
export const BudgetOutcome = {
  /** The bytes are reserved. */
  Ok: 'ok',
  /** Transient: the bytes fit the budget but not the space free right now. */
  Exhausted: 'Exhausted',
  /** Permanent: the bytes are more than the whole budget and can never fit. */
  ExceedsBudget: 'ExceedsBudget',
} as const;
/** Answer of a byte reservation. */
export type BudgetOutcome = (typeof BudgetOutcome)[keyof typeof BudgetOutcome];

/** Every failure kind a ledger or budget can answer with. */
export type CreditFailure =
  | typeof CreditOutcome.DataExhausted
  | typeof CreditOutcome.TerminalAlreadySpent
  | typeof BudgetOutcome.Exhausted
  | typeof BudgetOutcome.ExceedsBudget;
