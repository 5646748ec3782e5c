/**
 * Owned control on a batcher's lane, applied at a wake from its coalesced inbox (control-inbox.ts)
 * after the peer replies are staged (reply-lane.ts): a consumer's lifecycle, closes, grants and
 * singleton resolutions act on this side's slots. A function over the batcher's state (see
 * batcher.ts).
 */
import { formatSlotId } from '../wire/slot-id.ts';
import type { Batcher } from './batcher.ts';
import { closeSlotLocally } from './batcher-slots.ts';
import type { InboxDrain } from './control-inbox.ts';
import { peerCloseError } from './egress-record.ts';
import { MuxError } from './errors.ts';

/**
 * One drain's owned control: lifecycle first, then closes and grants. False when a failed
 * singleton ended the epoch (the drain's retirement, if any, is then not applied).
 */
export function applyOwned(b: Batcher, d: InboxDrain): boolean {
  // Lifecycle first: a consumer's cancel travels with the CloseSlot that retires its slot, and the
  // producer should learn it was cancelled, not just that the slot is unknown.
  for (const l of d.ownedLifecycle.values()) {
    const slot = b.slotFor(l.slot);
    if (slot && slot.sessionId === l.session) {
      if (l.cancel) slot.cancelled = true;
      slot.owner.onLifecycle(l.cancel);
    }
  }
  // Owned control: closes dominate; grants release withheld records.
  for (const e of d.owned.values()) {
    const id = e.slot;
    const slot = b.slotFor(id);
    if (!slot) continue;
    if (e.close >= 0) {
      closeSlotLocally(b, slot, peerCloseError(slot, e.close), false);
      continue;
    }
    if (e.resolution === 2) {
      b.epochDeath(new MuxError('ERR_EPOCH_DEATH', `singleton for ${formatSlotId(id)} failed: ${e.resolutionError}`));
      return false;
    }
    if (e.resolution === 1 && slot.fenced && (e.resolutionId === 0 || e.resolutionId === slot.fenceId)) {
      slot.fenced = false;
      slot.fenceId = 0;
      b.host.metrics.fencedSlots--;
    }
    if (e.credit > 0) slot.ledger.grant(e.credit);
    b.markReady(slot);
  }
  return true;
}
