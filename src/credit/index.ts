/**
 * `lanemux/credit`: the pure credit model of lanemux. No timers, no I/O; every decision is a plain function of
 * its inputs.
 *
 * - The model: the sender's {@link Gate} (with the async {@link CreditGate} and the
 *   {@link CreditRouter} on top) and the receiver's {@link Window}; {@link negotiate} and {@link grantTarget}.
 * - lanemux's record credit (docs/protocol.md §10.7): {@link classify} records, the owner's {@link SenderLedger}
 *   (C data credits plus one terminal reserve, grants saturating at 2^32−1), the receiver's
 *   {@link ReceiverAccount} (C+1 buffer, credit released only on consumption) and {@link ByteBudget}s.
 * - Limits read from the wire: {@link resolveLimits} (`initial_credit = 0` is a legacy peer; budget 0 → 1 MiB).
 *
 * Hot-path calls (spend, grant, admit, release) answer with string literals or numbers and never allocate; turn a
 * failure into an error with {@link creditErrorOf} or {@link creditViolation} when reporting it.
 *
 * @example
 * ```ts
 * import { SenderLedger, ReceiverAccount, CreditClass } from 'lanemux/credit';
 *
 * const ledger = new SenderLedger(32);
 * const account = new ReceiverAccount(32);
 * if (ledger.spend(CreditClass.Data) === 'ok') account.admit(CreditClass.Data);
 * account.release(1);                  // the consumer took the record
 * ledger.grant(account.takeGrant());   // a CreditUpdate of 1
 * ```
 *
 * @packageDocumentation
 */

export { DEFAULT_INITIAL_CREDIT, DEFAULT_PEER_BYTE_BUDGET, DEFAULT_SLOT_BYTE_BUDGET, MAX_CREDIT } from './constants.ts';
export { CreditClosed, CreditError, creditErrorOf, creditViolation } from './errors.ts';
export type { CreditErrorCode } from './errors.ts';
export { BudgetOutcome, CreditOutcome } from './outcome.ts';
export type { CreditFailure } from './outcome.ts';
export { Acquire, CreditGate, Gate } from './gate.ts';
export type { AcquireOptions } from './gate.ts';
export { Arrival, Window, batchFor } from './window.ts';
export { negotiate, negotiateInitialCredit, resolveLimits } from './negotiate.ts';
export type { AdvertisedLimits, ResolvedLimits, ResolveLimitsOptions } from './negotiate.ts';
export { grantTarget, grantTargetIndex } from './grant-target.ts';
export type { StreamKey } from './grant-target.ts';
export { CreditRouter } from './router.ts';
export { CreditClass, classify, occupiesBuffer } from './classify.ts';
export { SenderLedger } from './sender-ledger.ts';
export { ReceiverAccount } from './receiver-account.ts';
export type { ReceiverAccountOptions } from './receiver-account.ts';
export { ByteBudget, releasePair, reservePair } from './byte-budget.ts';
export { AUTO_GROW_FILL, AUTO_SHRINK_FILL, AutoWindow, DEFAULT_AUTO_MAX_RECORDS } from './auto-window.ts';
export type { AutoWindowOptions } from './auto-window.ts';
