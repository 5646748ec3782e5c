/**
 * Receiver-side reservations of (anchor, session) that an OpenSlot claims (docs/protocol.md §8, §10.2).
 * A bind owns the C+1 slot buffer from the start, so the consumer reads one buffer whether the
 * stream was attached, pre-bound, or is still waiting for its OpenSlot.
 */
import type { ReceiverAccount } from '../credit/receiver-account.ts';
import type { PeerId } from '../messenger/types.ts';
import { FrameKind } from '../wire/frame.ts';
import type { SlotId } from '../wire/slot-id.ts';
import { SlotBuffer, type WindowSink } from './slot-buffer.ts';

/** Why a bound stream ended, as the anchor learns it. */
export type BindEnd =
  /** The terminal was delivered and the slot closed cleanly. */
  | 'terminal'
  /** Dropped was injected (peer gone, epoch retired, protocol fault, watchdog). */
  | 'dropped'
  /** The accept window expired before an OpenSlot claimed the bind. */
  | 'expired'
  /** The consumer released it (cancel, detach, same-worker attach). */
  | 'released'
  /** The link was lost and the owner keeps the stream for a resume (docs/protocol.md §8.3): no Dropped. */
  | 'suspended';

/** The anchor side of a bind. */
export interface BindOwner {
  /** An OpenSlot claimed the bind: the sender is live (watchdog windows start counting). */
  onClaimed(bind: Bind): void;
  /** The bind ended; its buffer is closed (unread frames stay readable unless discarded). */
  onEnded(bind: Bind, end: BindEnd): void;
  /**
   * The bind's link was lost (peer gone, epoch changed) before its terminal: true if the owner keeps
   * the stream for a resume (docs/protocol.md §8.3), so its buffer closes without `Dropped` and it
   * ends `suspended`. Absent or false: it ends `Dropped`. `peer`: the resuming peer, for a pre-bind
   * no OpenSlot claimed yet (its first batch was lost with the link; the resume names its session).
   */
  suspend?(bind: Bind, peer?: PeerId): boolean;
  /**
   * The stream's window stays at its advertised C even when `mux.autoCredit` is on (a relay's source: its reader is
   * the next hop's sender, so a larger window would only make the relay hold more). Absent or false: tuned.
   */
  readonly fixedCredit?: boolean;
}

/**
 * The live ingress slot of a claimed bind, as the bind's users see it (`IngressSlot` implements it;
 * declared here so bind.ts does not import the ingress).
 */
export interface BoundSlot {
  readonly id: SlotId;
  readonly closed: boolean;
  /** The receiver's credit account of the stream. */
  readonly account: ReceiverAccount;
  /** Records delivered (watchdog liveness). */
  readonly arrivals: number;
  /** The peer and lane the slot arrived on. */
  readonly peer: PeerId;
  readonly lane: number;
  /** The consumer is gone: retire the slot and tell the owner `CloseSlot{UnknownSlot}`. */
  consumerGone(): void;
  /** The slot's link is known lost: retire it quietly (no reply), suspended if its owner keeps it. */
  linkLost(): void;
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
  slot: BoundSlot | null = null;
  /** Early lifecycle signal before the OpenSlot: 0 none, 1 stop, 2 cancel. */
  earlySignal = 0;
  /** Watchdog windows an answered attach has waited for its OpenSlot (docs/protocol.md §10.8 "Watchdog"). */
  deadWindows = 0;

  constructor(
    anchorId: bigint,
    sessionId: bigint,
    limit: number,
    slotByteBudget: number,
    lane: number,
    peer: PeerId | null,
    owner: BindOwner,
    deadline: number,
  ) {
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

  /** An OpenSlot claimed the bind: its buffer charges `window` and reports each drain to `onDrain`. */
  claim(slot: BoundSlot, window: WindowSink, onDrain: (bytes: number) => void): void {
    this.claimed = true;
    this.slot = slot;
    this.buffer.window = window;
    this.buffer.onDrain = onDrain;
  }

  /** The slot retired: stop drain reports, inject `Dropped` when asked, close the buffer. */
  closeBuffer(dropped: boolean): void {
    this.buffer.onDrain = null;
    if (dropped) this.buffer.pushForced(FrameKind.Dropped, undefined);
    this.buffer.close();
  }
}
