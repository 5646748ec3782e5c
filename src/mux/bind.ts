/**
 * Receiver-side reservations of (anchor, session) that an OpenSlot claims (protocol.md §10.4, §11).
 * A bind owns the C+1 slot buffer from the start, so the consumer reads one buffer whether the
 * stream was attached, pre-bound, or is still waiting for its OpenSlot.
 */
import type { PeerId } from '../messenger/types.ts';
import { SlotBuffer } from './slot-buffer.ts';
import type { IngressSlot } from './ingress.ts';

/** Why a bound stream ended, as the anchor learns it. */
export type BindEnd =
  /** The terminal was delivered and the slot closed cleanly. */
  | 'terminal'
  /** Dropped was injected (peer gone, epoch retired, protocol fault, watchdog). */
  | 'dropped'
  /** The accept window expired before an OpenSlot claimed the bind. */
  | 'expired'
  /** The consumer released it (cancel, detach, same-worker attach). */
  | 'released';

/** The anchor side of a bind. */
export interface BindOwner {
  /** An OpenSlot claimed the bind: the sender is live (watchdog windows start counting). */
  onClaimed(bind: Bind): void;
  /** The bind ended; its buffer is closed (unread frames stay readable unless discarded). */
  onEnded(bind: Bind, end: BindEnd): void;
}

/** One reservation of (anchor, session). */
export class Bind {
  readonly anchorId: bigint;
  readonly sessionId: bigint;
  /** Data credit C this receiver advertised for the stream. */
  readonly limit: number;
  /** Slot byte budget quoted in the answer or ticket. */
  readonly slotByteBudget: number;
  /** Lane the receiver chose. */
  readonly lane: number;
  /** The sender, when known (attach); null for a pre-bind. */
  readonly peer: PeerId | null;
  readonly buffer: SlotBuffer;
  readonly owner: BindOwner;
  /** Accept deadline (runtime ms). */
  readonly deadline: number;
  claimed = false;
  ended = false;
  /** The live ingress slot once claimed. */
  slot: IngressSlot | null = null;
  /** Early lifecycle signal before the OpenSlot: 0 none, 1 stop, 2 cancel. */
  earlySignal = 0;
  /** Watchdog windows an answered attach has waited for its OpenSlot (protocol.md §10.8). */
  deadWindows = 0;

  constructor(anchorId: bigint, sessionId: bigint, limit: number, slotByteBudget: number, lane: number, peer: PeerId | null, owner: BindOwner, deadline: number) {
    this.anchorId = anchorId;
    this.sessionId = sessionId;
    this.limit = limit;
    this.slotByteBudget = slotByteBudget;
    this.lane = lane;
    this.peer = peer;
    this.owner = owner;
    this.deadline = deadline;
    this.buffer = new SlotBuffer(limit + 1);
  }
}
