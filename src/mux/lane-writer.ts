/**
 * What writes a node's batches toward one (peer, lane), as the mux sees it: the producer's
 * {@link Batcher} on a node, the consumer's {@link ReplyLane} on a client (replies only). A batcher
 * is a reply lane plus its egress slots, so both coalesce control in a {@link ControlInbox}, stage
 * replies and write, park and retire by the reply lane's code; the mux routes replies and owned control to it, kicks, health-checks, retires it
 * when idle and kills its epoch when the link is lost.
 */
import type { LanemuxError } from '../errors.ts';
import type { PeerId } from '../messenger/types.ts';
import type { BatcherHost } from './batcher-host.ts';
import type { ControlInbox } from './control-inbox.ts';
import type { EgressSlot } from './egress-slot.ts';
import type { EndedSlots } from './ended-slots.ts';
import type { DrainLeftovers } from './reply-lane.ts';

export interface LaneWriter {
  readonly peer: PeerId;
  readonly lane: number;
  readonly inbox: ControlInbox;
  readonly retired: boolean;
  /** Live owned slots (always 0 on a client). */
  readonly liveSlots: number;
  /** The connection epoch its batches are pinned to (undefined: the transport has none). */
  readonly linkEpoch: number | undefined;
  /** True while a write awaits admission. */
  readonly parked: boolean;
  /** Records staged in the open batch. */
  readonly staged: number;
  /** True when it holds nothing: no live slots, nothing staged or pending. */
  readonly idle: boolean;
  /** Sweep ticks spent idle (for eviction). */
  idleTicks: number;
  /** The owned slot for a SlotId at its live generation, if any. */
  slotFor(id: number): EgressSlot | undefined;
  /** Every live owned slot. */
  slots(): Iterable<EgressSlot>;
  /** `flushBatch()`: write now (synchronous; never throws). */
  kick(): void;
  /** An inbound batch from this (peer, lane) was handled: write what is due by now (never throws). */
  afterIngress(): void;
  /** Epoch death (docs/protocol.md §3.5, §10.1). */
  epochDeath(error: LanemuxError): void;
  /** Stop for good; the credit replies it still held are handed back (see `ReplyLane.retire`). */
  retire(error?: LanemuxError, graceful?: boolean): DrainLeftovers;
}

/**
 * Makes the writer of (peer, lane); `previous` is the lane's retired writer, whose slot ids the new
 * one continues (a late credit or close for them must find nothing).
 */
export type LaneWriterFactory = (
  host: BatcherHost,
  peer: PeerId,
  lane: number,
  ended: EndedSlots,
  previous: LaneWriter | undefined,
) => LaneWriter;
