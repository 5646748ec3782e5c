/**
 * What the page writes back on the mux (docs/protocol.md §10.2): CreditUpdates, its CloseSlots and
 * LifecycleSlots, gathered while a batch is applied or a task reads, and written as one batch at the
 * end of the task. A batch carries at most one CreditUpdate per slot (grants add up); a cancel's
 * `CloseSlot{UnknownSlot}` and `LifecycleSlot{cancel}` stay adjacent in one batch.
 */
import { BatchEncoder } from '../wire/encoder.ts';
import { type CloseReason, LifecycleAction, RECORD_HEADER_LEN } from '../wire/constants.ts';

/** One close reply: a CloseSlot, optionally followed by a LifecycleSlot for `session`. */
interface Close {
  readonly slot: number;
  readonly reason: number;
  readonly session: bigint;
  /** -1: no LifecycleSlot. */
  readonly action: number;
}

/** Room a close (CloseSlot + LifecycleSlot) takes in a batch. */
const CLOSE_PAIR_BYTES = 2 * RECORD_HEADER_LEN + 1 + 9;

/** The page's reply writer for one link. */
export class Replies {
  readonly #send: (batch: Uint8Array) => boolean;
  #enc: BatchEncoder;
  #credits = new Map<number, number>();
  #closes: Close[] = [];
  #scheduled = false;
  /** This side's epoch toward the peer (one per link, from 1) and the next batch_seq. */
  #epoch = 0n;
  #seq = 0;

  constructor(send: (batch: Uint8Array) => boolean) {
    this.#send = send;
    this.#enc = new BatchEncoder({ maxBytes: 4096 });
  }

  /** A new link: a new epoch, batch_seq from 0, nothing pending from the old one, batches at most `maxBytes`. */
  reset(epoch: number, maxBytes: number): void {
    this.#epoch = BigInt(epoch);
    this.#seq = 0;
    this.#credits.clear();
    this.#closes = [];
    this.#enc = new BatchEncoder({ maxBytes: Math.max(64, Math.min(maxBytes - 1, 61_440)) });
  }

  /** Grant `delta` more records to `slot`. */
  credit(slot: number, delta: number): void {
    this.#credits.set(slot, (this.#credits.get(slot) ?? 0) + delta);
    this.#schedule();
  }

  /** `CloseSlot{reason}` on `slot`; with `action` ≥ 0, the LifecycleSlot for `session` right after it. */
  close(slot: number, reason: number, session = 0n, action = -1): void {
    this.#credits.delete(slot);
    this.#closes.push({ slot, reason, session, action });
    this.#schedule();
  }

  /** `LifecycleSlot{stop}` for `session` on `slot`. */
  stop(slot: number, session: bigint): void {
    this.#closes.push({ slot, reason: -1, session, action: LifecycleAction.Stop });
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(this.flush);
  }

  /** Write everything pending now (also run at the end of the task that queued it). */
  readonly flush = (): void => {
    this.#scheduled = false;
    if (this.#epoch === 0n) return;
    const enc = this.#enc;
    enc.begin(this.#epoch, this.#seq);
    for (const c of this.#closes) {
      if (!enc.fits(CLOSE_PAIR_BYTES)) this.#write();
      if (c.reason >= 0) enc.appendCloseSlot(c.slot, 0, c.reason as CloseReason);
      if (c.action >= 0) enc.appendLifecycleSlot(c.slot, 0, c.session, c.action as LifecycleAction);
    }
    for (const [slot, delta] of this.#credits) {
      if (!enc.fits(4)) this.#write();
      enc.appendCreditUpdate(slot, 0, delta);
    }
    this.#closes = [];
    this.#credits.clear();
    if (enc.recordCount > 0) this.#write();
    else enc.discard();
  };

  /** Send the open batch and begin the next. */
  #write(): void {
    this.#send(this.#enc.finish());
    this.#seq = (this.#seq + 1) >>> 0;
    this.#enc.begin(this.#epoch, this.#seq);
  }
}
