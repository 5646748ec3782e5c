/**
 * The ends of a batcher's epoch and of the batcher itself, for its slots (docs/protocol.md §3.5,
 * §10.1). The reply lane (reply-lane.ts) discards the staged batch, takes the new epoch, re-posts
 * or hands back credit and writes the last replies; these are the batcher's part: epoch death
 * fails every live slot once, retirement closes them, gracefully (a `CloseSlot{PeerGone}` each) or
 * not. Functions over the batcher's state (see batcher.ts); neither is on the record path.
 */
import type { LanemuxError } from '../errors.ts';
import { WakeSource } from '../metrics/mux-metrics.ts';
import { CloseReason } from '../wire/constants.ts';
import type { Batcher } from './batcher.ts';
import { recoverReplay } from './batcher-replay.ts';
import { closeSlotLocally, emitClose } from './batcher-slots.ts';
import { clearWindowBlocked, syncWindow } from './batcher-window.ts';
import type { EgressSlot } from './egress-slot.ts';
import { MuxError } from './errors.ts';

const NO_SLOTS: EgressSlot[] = [];

/**
 * Epoch death, once the staged batch is discarded and the new epoch is in place: the open and
 * in-flight batches' terminals are discarded, every live slot and waiting open fails once, and the
 * batcher follows the peer window of its link.
 */
export function endEpoch(b: Batcher, error: LanemuxError): void {
  const guards = [...b.inflightGuards, ...b.guards];
  b.guards = [];
  b.opens = [];
  b.inflightGuards = NO_SLOTS;
  b.inflightOpens = NO_SLOTS;
  const pendingOpens = b.pendingOpens;
  b.pendingOpens = [];
  b.readySlots.clear();
  syncWindow(b);
  clearWindowBlocked(b);
  // What the lost link took goes back to its streams before any slot closes (and suspends its stream).
  recoverReplay(b);
  const live: EgressSlot[] = [];
  for (const s of b.slotTable.values()) live.push(s);
  for (const g of guards) g.owner.onRetired('Discarded');
  for (const s of live) closeSlotLocally(b, s, error, false);
  for (const s of pendingOpens) closeSlotLocally(b, s, error, false);
  if (b.openRoom.length > 0) b.wake(WakeSource.open); // waiting opens proceed in the new epoch
}

/**
 * Retirement, before the inbox closes; answers whether the last replies are written.
 *
 * - `graceful` and not parked (a `retire` posted to the inbox, applied at a wake): each live slot
 *   gets a `CloseSlot{PeerGone}` so its consumer learns at once.
 * - otherwise (eviction, cancel, teardown): live slots fail locally and the terminals of the open
 *   and in-flight batches are discarded.
 */
export function retireSlots(b: Batcher, error: LanemuxError | undefined, graceful: boolean): boolean {
  const err = error ?? new MuxError('ERR_CLOSED', `batcher for ${b.peer} lane ${b.lane} retired`, { retryable: true });
  // Waiting opens re-resolve a fresh batcher (the mux retries ERR_CLOSED).
  const room = b.openRoom;
  b.openRoom = [];
  recoverReplay(b);
  for (const w of room) w.reject(new MuxError('ERR_CLOSED', 'batcher retired; re-resolve', { retryable: true }));
  for (const s of b.pendingOpens) closeSlotLocally(b, s, err, false);
  b.pendingOpens = [];
  b.readySlots.clear();
  if (graceful && !b.parked) {
    const m = b.host.metrics;
    for (const s of b.slotTable.values()) {
      m.withheldRecords -= s.clearQueue();
      if (!b.parked) emitClose(b, s, CloseReason.PeerGone, err);
      // A clamp flush that parked leaves the close unwritten: fail the producer all the same.
      if (!s.closed) closeSlotLocally(b, s, err, false);
    }
    return true;
  }
  for (const g of b.guards) g.owner.onRetired('Discarded');
  for (const g of b.inflightGuards) g.owner.onRetired('Discarded');
  b.guards = [];
  b.inflightGuards = NO_SLOTS;
  b.inflightOpens = NO_SLOTS;
  for (const s of b.slotTable.values()) closeSlotLocally(b, s, err, false);
  clearWindowBlocked(b);
  return false;
}
