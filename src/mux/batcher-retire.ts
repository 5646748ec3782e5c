/**
 * The ends of a batcher's epoch and of the batcher itself (docs/protocol.md §3.5, §10.1): epoch
 * death fails every live slot once and starts a new epoch at batch_seq 0; retirement stops it for
 * good, gracefully (its last replies written) or not (what it held handed back for its
 * replacement). Functions over the batcher's state (see batcher.ts); neither is on the record path.
 */
import type { LanemuxError } from '../errors.ts';
import { WakeSource } from '../metrics/mux-metrics.ts';
import { CloseReason } from '../wire/constants.ts';
import type { Batcher } from './batcher.ts';
import { stageReplies } from './batcher-control.ts';
import { closeSlotLocally, emitClose } from './batcher-slots.ts';
import { clearWindowBlocked, syncWindow } from './batcher-window.ts';
import type { EgressSlot } from './egress-slot.ts';
import { MuxError } from './errors.ts';

/** Credit replies a retired batcher still held, to hand to its replacement. */
export interface DrainLeftovers {
  credit: number[];
}

/**
 * Epoch death (docs/protocol.md §3.5, §10.1): fail every live slot once, discard the staged batch (re-posting its credit
 * replies), take a new epoch and restart batch_seq at 0.
 */
export function failEpoch(b: Batcher, error: LanemuxError): void {
  const m = b.host.metrics;
  m.epochDeaths++;
  const lostReplies = [...b.inflightReplies, ...b.replies];
  const guards = [...b.inflightGuards, ...b.guards];
  discardOpenBatch(b);
  m.stagedRecords -= b.gate.staged;
  b.gate.reset();
  b.typeCounts.fill(0);
  b.resetDataSlots();
  b.replies = [];
  b.guards = [];
  b.opens = [];
  b.inflightReplies = [];
  b.inflightGuards = [];
  b.parked = false;
  b.parkToken = 0;
  const pendingOpens = b.pendingOpens;
  b.pendingOpens = [];
  b.readySlots = [];
  // The new epoch is in place before any owner callback runs: a callback that re-opens a slot
  // at once must find a consistent batcher.
  b.epoch = b.host.nextEpoch();
  b.batchSeq = 0;
  b.linkEpoch = b.host.sink.linkEpoch?.(b.peer);
  syncWindow(b);
  clearWindowBlocked(b);
  const live: EgressSlot[] = [];
  for (const s of b.slotTable.values()) live.push(s);
  for (const g of guards) g.owner.onRetired('Discarded');
  for (const s of live) closeSlotLocally(b, s, error, false);
  for (const s of pendingOpens) closeSlotLocally(b, s, error, false);
  if (b.openRoom.length > 0) b.wake(WakeSource.open); // waiting opens proceed in the new epoch
  if (!b.host.peerAlive(b.peer)) return;
  for (let i = 0; i < lostReplies.length; i += 2) {
    if (b.inbox.postReplyCredit(lostReplies[i]!, lostReplies[i + 1]!)) m.creditReposted += lostReplies[i + 1]!;
    else m.creditLost += lostReplies[i + 1]!;
  }
}

/**
 * Stop for good. Later posts are refused, so writers re-resolve a fresh batcher.
 *
 * - `graceful` (a `retire` posted to the inbox, applied at a wake): each live slot gets a
 *   `CloseSlot{PeerGone}` so its consumer learns at once, and the inbox's last drain is written
 *   in a final flush, so a close or credit posted during retirement is never lost.
 * - otherwise (eviction, cancel, teardown): live slots fail locally, the staged batch is
 *   discarded (its records are not counted as sent), and the credit replies it held or that
 *   were still in the inbox are returned for the caller to re-post to the replacement.
 */
export function retireBatcher(b: Batcher, error: LanemuxError | undefined, graceful: boolean): DrainLeftovers {
  if (b.retired) return { credit: [] };
  b.retired = true;
  if (b.timer !== null) {
    b.host.runtime.clearTimer(b.timer);
    b.timer = null;
  }
  const err = error ?? new MuxError('ERR_CLOSED', `batcher for ${b.peer} lane ${b.lane} retired`, { retryable: true });
  const m = b.host.metrics;
  // Waiting opens re-resolve a fresh batcher (the mux retries ERR_CLOSED).
  const room = b.openRoom;
  b.openRoom = [];
  for (const w of room) w.reject(new MuxError('ERR_CLOSED', 'batcher retired; re-resolve', { retryable: true }));
  for (const s of b.pendingOpens) closeSlotLocally(b, s, err, false);
  b.pendingOpens = [];
  b.readySlots = [];
  const credit = b.leftoverCredit;
  b.leftoverCredit = [];
  if (graceful && !b.parked) {
    for (const s of b.slotTable.values()) {
      m.withheldRecords -= s.clearQueue();
      if (!b.parked) emitClose(b, s, CloseReason.PeerGone, err);
      // A clamp flush that parked leaves the close unwritten: fail the producer all the same.
      if (!s.closed) closeSlotLocally(b, s, err, false);
    }
    const d = b.inbox.close();
    if (!b.parked) {
      stageReplies(b, d);
      b.flush();
    } else for (const [slot, e] of d.replies) if (e.credit > 0) credit.push(slot, e.credit);
    credit.push(...b.leftoverCredit);
    b.leftoverCredit = [];
    return { credit };
  }
  for (const g of b.guards) g.owner.onRetired('Discarded');
  for (const g of b.inflightGuards) g.owner.onRetired('Discarded');
  b.guards = [];
  b.inflightGuards = [];
  for (const s of b.slotTable.values()) closeSlotLocally(b, s, err, false);
  const d = b.inbox.close();
  m.stagedRecords -= b.gate.staged;
  b.gate.reset();
  discardOpenBatch(b);
  b.typeCounts.fill(0);
  b.resetDataSlots();
  clearWindowBlocked(b);
  credit.push(...b.replies);
  b.replies = [];
  for (const [slot, e] of d.replies) if (e.credit > 0) credit.push(slot, e.credit);
  return { credit };
}

/** Drop the open batch unsent: its records' window bytes come back. */
function discardOpenBatch(b: Batcher): void {
  b.enc.discard();
  b.peerEgress.uncharge(b.openWindowBytes, b.windowEpoch);
  b.openWindowBytes = 0;
}
