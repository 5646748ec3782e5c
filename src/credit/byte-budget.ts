/**
 * Byte budgets of the receive side (`slot_byte_budget` of the attach answer, docs/protocol.md §8; `peerByteBudget`; the hold of §10.2): a slot's
 * hold budget and a peer's budget shared by all its lanes.
 */
import { assertCount } from './count.ts';
import { BudgetOutcome } from './outcome.ts';

/**
 * A byte budget with reserve/release. A reservation that could fit later is refused as transient
 * (`Exhausted`); one larger than the whole budget as permanent (`ExceedsBudget`). Allocation-free.
 */
export class ByteBudget {
  /** The whole budget, in bytes. */
  readonly capacity: number;
  #used = 0;

  /** @param capacity - the budget in bytes, a safe natural number. */
  constructor(capacity: number) {
    assertCount(capacity, 'capacity');
    this.capacity = capacity;
  }

  /** Bytes reserved now. */
  get used(): number {
    return this.#used;
  }

  /** Bytes still free. */
  get free(): number {
    return this.capacity - this.#used;
  }

  /** Reserves `bytes`: `ok`, `Exhausted` (fits the budget, not the free space) or `ExceedsBudget`. */
  reserve(bytes: number): BudgetOutcome {
    assertCount(bytes, 'bytes');
    if (bytes > this.capacity) return BudgetOutcome.ExceedsBudget;
    if (bytes > this.capacity - this.#used) return BudgetOutcome.Exhausted;
    this.#used += bytes;
    return BudgetOutcome.Ok;
  }

  /** Returns `bytes`. Over-releasing is clamped: usage never goes below 0. */
  release(bytes: number): void {
    assertCount(bytes, 'bytes');
    this.#used = bytes < this.#used ? this.#used - bytes : 0;
  }
}

/**
 * Reserves `bytes` in a slot budget and its peer budget, both or neither. The slot is asked first, so a slot
 * refusal leaves the peer untouched; a peer refusal rolls the slot reservation back.
 *
 * @returns `ok`, or the refusing budget's answer.
 */
export function reservePair(slot: ByteBudget, peer: ByteBudget, bytes: number): BudgetOutcome {
  const first = slot.reserve(bytes);
  if (first !== BudgetOutcome.Ok) return first;
  const second = peer.reserve(bytes);
  if (second !== BudgetOutcome.Ok) slot.release(bytes);
  return second;
}

/** Returns `bytes` to both a slot budget and its peer budget. */
export function releasePair(slot: ByteBudget, peer: ByteBudget, bytes: number): void {
  slot.release(bytes);
  peer.release(bytes);
}
