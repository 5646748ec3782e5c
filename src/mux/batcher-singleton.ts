/**
 * A record over its batcher's batch cap goes alone, as a rendezvous transfer (docs/protocol.md §8.1,
 * rendezvous.ts): encoded in a singleton batch of its own, staged for the peer to pull, its slot
 * fenced until the descriptor is admitted. Staging room toward the peer is bounded: a record that
 * finds none waits in its slot's queue until room returns. Functions over the batcher's state (see
 * batcher.ts); the rare path, off the per-record one.
 */
import { DropReason, WakeSource } from '../metrics/mux-metrics.ts';
import { CloseReason, RecordType } from '../wire/constants.ts';
import { BatchEncoder } from '../wire/encoder.ts';
import type { Batcher } from './batcher.ts';
import { leaveReplayLog } from './batcher-replay.ts';
import { closeSlotLocally, emitClose } from './batcher-slots.ts';
import { windowBlock } from './batcher-window.ts';
import { appendRecord, EMIT_OK, EMIT_PARKED, EMIT_TOO_LARGE } from './egress-record.ts';
import type { EgressSlot } from './egress-slot.ts';
import { MuxError } from './errors.ts';
import { formatMuxSlot } from './rendezvous.ts';

/**
 * A record over the batch cap goes alone, as a rendezvous transfer (docs/protocol.md §8.1): flush what is
 * staged, encode the singleton batch (it takes a batch_seq), stage it for the peer to pull and
 * fence the slot until the descriptor is admitted. A terminal goes with its CloseSlot and closes
 * the slot. Over `stagedPayloadMax` the stream fails with ERR_RECORD_TOO_LARGE.
 */
export function emitSingleton(
  b: Batcher,
  slot: EgressSlot,
  kind: number,
  value: unknown,
  terminal: boolean,
  total: number,
): number {
  const host = b.host;
  const m = host.metrics;
  if (total > host.config.stagedPayloadMax) {
    const error = new MuxError(
      'ERR_RECORD_TOO_LARGE',
      `a ${total}-byte record exceeds stagedPayloadMax (${host.config.stagedPayloadMax} bytes) toward ${b.peer}`,
    );
    m.withheldRecords -= slot.clearQueue();
    slot.closeOwed = true;
    emitClose(b, slot, CloseReason.PeerGone, error);
    return EMIT_TOO_LARGE;
  }
  if (!host.stageRoom(b.peer, total)) {
    // Staged bytes toward this peer are at their bound: the record waits in the slot's queue.
    if (b.stageBlocked.length === 0) host.whenStageRoom(b.peer, b.onStageRoom);
    if (!b.stageBlocked.includes(slot)) b.stageBlocked.push(slot);
    return EMIT_PARKED;
  }
  // A singleton counts against the peer window by its whole batch (what the receiver charges or
  // releases for it); rendezvous keeps its own budget for the staged bytes themselves.
  const windowed = b.windowed(kind, value);
  if (windowed && !b.peerEgress.sendWindow.fits(total)) return windowBlock(b, slot);
  b.flush();
  if (b.parked) return EMIT_PARKED;
  if (terminal) slot.ledger.spendTerminal();
  else if (slot.ledger.spendData() !== 'ok') return EMIT_PARKED;
  // A PING on the lane says nothing of a pull: the stream keeps its records in its own ring from here.
  leaveReplayLog(b, slot);
  const enc = new BatchEncoder({ maxBytes: total, initialBytes: total });
  enc.begin(b.epoch, b.batchSeq, b.lane & 0x0f);
  const seq = slot.nextSeq;
  appendRecord(enc, slot.id, seq, kind, value);
  slot.nextSeq = (seq + 1) >>> 0 || 0xffff_ffff;
  if (terminal) {
    enc.appendCloseSlot(slot.id, slot.nextSeq, CloseReason.TerminalSent);
    slot.nextSeq = (slot.nextSeq + 1) >>> 0;
  }
  const payload = enc.finish();
  b.batchSeq = (b.batchSeq + 1) >>> 0;
  const charged = windowed ? payload.byteLength : 0;
  const windowEpoch = b.windowEpoch;
  if (windowed) b.peerEgress.charge(charged);
  m.recordsSent[RecordType.Data]! += 1;
  if (terminal) m.recordsSent[RecordType.CloseSlot]! += 1;
  m.batchesSent++;
  m.recordsPerBatchSent.observe(terminal ? 2 : 1);
  m.rendezvousSingletons++;
  const { id, admission } = host.stage(b.peer, b.lane, payload, formatMuxSlot(b.epoch, slot.id, slot.sessionId));
  slot.rendezvous = true;
  if (terminal) {
    slot.terminalStaged = true;
    closeSlotLocally(b, slot, null, true);
    // The terminal's guard reports when the descriptor is admitted.
    if (admission === true) slot.owner.onRetired('Sent');
    else
      admission.then(
        () => slot.owner.onRetired('Sent'),
        (e: unknown) => singletonFailed(b, slot, e, true, charged, windowEpoch),
      );
    return EMIT_OK;
  }
  // A rendezvous record always fences its slot, even when admitted synchronously: the receiver
  // resolves it outside the ordered lane.
  slot.fenced = true;
  slot.fenceId = id;
  m.fencedSlots++;
  const epoch = b.epoch;
  const resolved = (): void => {
    if (slot.fenceId !== id || slot.closed || b.epoch !== epoch) return;
    b.inbox.postResolution(slot.id, true, '', id);
  };
  if (admission === true) resolved();
  else admission.then(resolved, (e: unknown) => singletonFailed(b, slot, e, false, charged, windowEpoch));
  return EMIT_OK;
}

/** A staged singleton was refused by the transport: epoch death for the live generation (docs/protocol.md §8.1). */
function singletonFailed(
  b: Batcher,
  slot: EgressSlot,
  error: unknown,
  terminal: boolean,
  windowBytes: number,
  windowEpoch: number,
): void {
  // Its descriptor never left: the receiver will not release what was charged for it.
  b.peerEgress.uncharge(windowBytes, windowEpoch);
  if (terminal) slot.owner.onRetired('Discarded');
  const why = error instanceof Error ? error.message : String(error);
  if (!terminal && !slot.closed && b.slotFor(slot.id) === slot) {
    b.inbox.postResolution(slot.id, false, why);
    return;
  }
  b.host.metrics.recordsDropped[DropReason.stale_singleton]! += 1;
}

/** Staging room toward the peer returned: the slots that waited for it may release again. */
export function stageRoomReturned(b: Batcher): void {
  const blocked = b.stageBlocked;
  b.stageBlocked = [];
  for (const s of blocked) if (!s.closed) b.markReady(s);
  if (!b.retired) b.wake(WakeSource.control);
}
