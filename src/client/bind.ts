/**
 * One binding of a stream to a producer (docs/protocol.md §8): made by an attach answer or a ticket,
 * claimed by the producer's OpenSlot, and the credit law of its slot (§10.7). Pure: no timers, no I/O.
 *
 * `avail` is the producer's credit as this side counts it: its credit plus its records and grants in
 * flight (C − records buffered − records taken and not yet granted). A grant is due when it falls to
 * half the window, so a stream read as fast as it arrives costs one CreditUpdate per C/2 records.
 */
import type { ClientStream } from './stream.ts';

/** Where a bind is in its life. */
export type BindState =
  /** Answered or ticketed; its OpenSlot has not arrived. */
  | 'waiting'
  /** Claimed: records flow on `slot`. */
  | 'live'
  /** Its link was lost; the stream waits for a resume (§8.3). */
  | 'lost'
  /** Ended: terminal, close, cancel or failure. */
  | 'done';

/** A stream's binding to one producer (one slot). */
export class Bind {
  readonly stream: ClientStream;
  /** `routing_session_id`: what the OpenSlot and a resume name. */
  readonly session: bigint;
  /** C: the credit granted at open. */
  readonly credit: number;
  /** The heartbeat interval advertised (ms): the watchdog's window. */
  readonly heartbeatMs: number;
  /** Bytes of records this slot may keep unread (`slot_byte_budget`). */
  readonly budget: number;
  /** The producer's attach id (an attach made again after a lost link names it), if any. */
  readonly attachId: string | undefined;
  /** When it was made (runtime clock): an unclaimed ticket waits one accept window. */
  readonly since: number;
  /** True for an attach answer, false for a ticket (a pre-bind). */
  readonly answered: boolean;
  state: BindState = 'waiting';
  /** The SlotId once claimed. */
  slot = -1;
  /** The frame_seq the next Data record must carry. */
  nextSeq = 1;
  avail: number;
  /** Records of this bind in the stream's queue, and their body bytes. */
  buffered = 0;
  bytes = 0;
  /** Records taken whose credit has not been granted back. */
  ungranted = 0;
  /** The link epoch its slot was claimed on (its bytes count in that link's receive window). */
  epoch = 0;
  /** The page asked the producer to stop before the OpenSlot arrived: sent with the claim. */
  stopPending = false;
  /** Watchdog: something arrived in this window; windows missed in a row; when this window began. */
  heard = false;
  missed = 0;
  windowStart: number;

  constructor(
    stream: ClientStream,
    o: {
      session: bigint;
      credit: number;
      heartbeatMs: number;
      budget: number;
      answered: boolean;
      attachId?: string | undefined;
      now: number;
    },
  ) {
    this.stream = stream;
    this.session = o.session;
    this.credit = o.credit;
    this.avail = o.credit;
    this.heartbeatMs = o.heartbeatMs;
    this.budget = o.budget;
    this.answered = o.answered;
    this.attachId = o.attachId;
    this.since = o.now;
    this.windowStart = o.now;
  }

  /**
   * A Data record arrived: spend one credit. Only a terminal may arrive with none left (the one
   * terminal reserve); anything else is a credit overspend and returns false.
   */
  spend(terminal: boolean): boolean {
    if (this.avail <= 0 && !(terminal && this.avail === 0)) return false;
    this.avail--;
    this.heard = true;
    return true;
  }

  /** A record of `bytes` left the queue (read or dropped). Returns the credit to grant now (0: none due). */
  take(bytes: number, queued: boolean): number {
    if (queued) {
      this.buffered--;
      this.bytes -= bytes;
    }
    this.ungranted++;
    return this.due();
  }

  /** The grant due now, if any, counted as sent. */
  due(): number {
    if (this.state !== 'live' || this.ungranted === 0 || this.avail > this.credit >> 1) return 0;
    const d = this.ungranted;
    this.ungranted = 0;
    this.avail += d;
    return d;
  }
}
