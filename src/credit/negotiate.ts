/**
 * Negotiating credit limits: the model's `negotiate` and lanemux's reading of the limits
 * a peer advertises in an attach answer or ticket (docs/protocol.md §8: the defaults of an attach answer).
 */
import { assertCount } from './count.ts';
import { DEFAULT_SLOT_BYTE_BUDGET, MAX_CREDIT } from './constants.ts';
import { CreditError } from './errors.ts';

/**
 * The model's `negotiate(ours, theirs)`: the smaller proposal, or `null` (none) when that minimum is 0.
 * Zero is refused because under a zero window nothing is sent, so nothing is consumed or ever granted.
 */
export function negotiate(ours: number, theirs: number): number | null {
  assertCount(ours, 'ours');
  assertCount(theirs, 'theirs');
  const m = Math.min(ours, theirs);
  return m === 0 ? null : m;
}

/**
 * `negotiate` for `initial_credit`, failing when the result is 0.
 *
 * @throws {@link CreditError} `ERR_INITIAL_CREDIT_ZERO`, whose message names `initial_credit`.
 */
export function negotiateInitialCredit(ours: number, theirs: number): number {
  const m = negotiate(ours, theirs);
  if (m === null) {
    throw new CreditError(
      'ERR_INITIAL_CREDIT_ZERO',
      `initial_credit = 0 refused (ours ${String(ours)}, theirs ${String(theirs)}): under a zero window nothing can be sent`,
    );
  }
  return m;
}

/** Limits as advertised on the wire (attach answer or `StreamOpenTicket`), zero semantics not yet applied. */
export interface AdvertisedLimits {
  /** `initial_credit`: the receiver's per-slot data credit C. 0 means "not offering the mux". */
  readonly initialCredit: number;
  /** `slot_byte_budget`: the receiver's per-slot byte budget. 0 means "use the default". */
  readonly slotByteBudget: number;
}

/** Limits after zero semantics: both positive. */
export interface ResolvedLimits {
  /** The per-slot data credit C (≥ 1); the slot buffer holds C+1 records. */
  readonly initialCredit: number;
  /** The per-slot byte budget in bytes (≥ 1). */
  readonly slotByteBudget: number;
}

/** Options of {@link resolveLimits}. */
export interface ResolveLimitsOptions {
  /** Transport key named in the error when the peer is a legacy one. Defaults to `"messenger-mux-v2"`. */
  readonly transportKey?: string | undefined;
}

/**
 * Applies the zero semantics of docs/protocol.md §8 to limits read from the wire:
 * - `initialCredit` 0 fails (a legacy peer; the mux is unusable with it), whatever the budget;
 * - `slotByteBudget` 0 resolves to {@link DEFAULT_SLOT_BYTE_BUDGET} (1,048,576);
 * - non-zero values pass through unchanged. The sender opens already holding C: no minimum is taken.
 *
 * @throws {@link CreditError} `ERR_INITIAL_CREDIT_ZERO` naming the key and the text `initial_credit = 0`;
 *   `ERR_INVALID_ARGUMENT` when a value is not a natural number or C exceeds 2^32−1.
 */
export function resolveLimits(advertised: AdvertisedLimits, options: ResolveLimitsOptions = {}): ResolvedLimits {
  const { initialCredit, slotByteBudget } = advertised;
  assertCount(initialCredit, 'initial_credit');
  assertCount(slotByteBudget, 'slot_byte_budget');
  if (initialCredit === 0) {
    const key = options.transportKey ?? 'messenger-mux-v2';
    throw new CreditError(
      'ERR_INITIAL_CREDIT_ZERO',
      `${key}: peer answered initial_credit = 0 (a legacy peer not offering the mux); the attach fails`,
    );
  }
  if (initialCredit > MAX_CREDIT) {
    throw new CreditError('ERR_INVALID_ARGUMENT', `initial_credit ${String(initialCredit)} exceeds 2^32-1`);
  }
  return {
    initialCredit,
    slotByteBudget: slotByteBudget === 0 ? DEFAULT_SLOT_BYTE_BUDGET : slotByteBudget,
  };
}
