/**
 * A slot's open and close on its batcher (docs/protocol.md §10.2). Opening: the index, the OpenSlot
 * record in a batch of its own, and the open ack (the OpenSlot admitted, or at once with
 * `asyncOpenAck` behind a fence); while the batcher is parked on a write, opens queue up to
 * {@link OPEN_QUEUE_DEPTH} and further attaches wait for room. Closing: a CloseSlot after the last
 * record when the producer left, and the local close that frees the index and fails the producer.
 * Functions over the batcher's state (see batcher.ts); per stream, not per record.
 */
import { WakeSource } from '../metrics/mux-metrics.ts';
import type { LanemuxError } from '../errors.ts';
import {
  BATCH_HEADER_LEN,
  CLOSE_RECORD_LEN,
  type CloseReason,
  RECORD_HEADER_LEN,
  RecordType,
} from '../wire/constants.ts';
import { formatSlotId, slotGeneration, slotIndex } from '../wire/slot-id.ts';
import type { Batcher } from './batcher.ts';
import { EgressSlot, type EgressSlotOwner } from './egress-slot.ts';
import { MuxError } from './errors.ts';
import { StagedKind } from './flush-gate.ts';

/** Opens that may wait behind a parked write; more opens wait for room (`OPEN_QUEUE_DEPTH`). */
export const OPEN_QUEUE_DEPTH = 64;

/** Per-receiver bound on slot indices: a sender never opens more live slots than a table holds. */
export const MAX_LIVE_SLOTS_PER_BATCHER = 65_536;

/** `fenceId` of a slot fenced behind its own OpenSlot (asyncOpenAck); transfer ids start at 1. */
export const OPEN_FENCE = -1;

/** A batch holding one OpenSlot: header + record header + anchor id + session id. */
const OPEN_BATCH_BYTES = BATCH_HEADER_LEN + RECORD_HEADER_LEN + 16;

/**
 * Open a slot for (anchor, session) holding `credit` (the advertised window). Resolves once the
 * OpenSlot batch is admitted (the awaited open ack), with the slot ready for records.
 */
export function openEgressSlot(
  b: Batcher,
  anchorId: bigint,
  sessionId: bigint,
  credit: number,
  owner: EgressSlotOwner,
  slotByteBudget: number,
): Promise<EgressSlot> {
  if (b.retired) return Promise.reject(new MuxError('ERR_CLOSED', 'batcher retired; re-resolve', { retryable: true }));
  if (b.parked && b.pendingOpens.length >= OPEN_QUEUE_DEPTH) {
    // The open queue is full while the peer is congested: the attach waits for room.
    return new Promise((resolve, reject) => {
      b.openRoom.push({
        retry: () => openEgressSlot(b, anchorId, sessionId, credit, owner, slotByteBudget).then(resolve, reject),
        reject,
      });
    });
  }
  if (b.cap < OPEN_BATCH_BYTES) {
    // A cap this small (29..44 bytes) passes the batch-cap clamp but cannot carry an OpenSlot: refuse
    // before an index is taken and the slot counted live.
    return Promise.reject(
      new MuxError(
        'ERR_RECORD_TOO_LARGE',
        `the ${b.cap}-byte batch cap toward ${b.peer} cannot carry an OpenSlot (${OPEN_BATCH_BYTES} bytes): raise maxBatchBytes or the transport's message size`,
      ),
    );
  }
  if (b.liveSlots >= MAX_LIVE_SLOTS_PER_BATCHER) {
    return Promise.reject(
      new MuxError('ERR_TOO_MANY_SLOTS', `peer ${b.peer} lane ${b.lane} already holds ${b.liveSlots} live slots`),
    );
  }
  const id = b.slotTable.allocate();
  const slot = new EgressSlot(b, id, anchorId, sessionId, credit, owner, slotByteBudget, b.peerEgress);
  b.slotTable.put(slot);
  b.inbox.publish(slotIndex(id), slotGeneration(id), sessionId);
  b.liveSlots++;
  b.host.metrics.liveSlots++;
  b.host.metrics.batcherWakes[WakeSource.open]! += 1;
  if (b.host.config.asyncOpenAck) {
    // Ack at once (`asyncOpenAck`). The slot is fenced only if the OpenSlot is not admitted
    // synchronously: its records wait until the open is on its way.
    slot.openAsync = true;
    if (b.parked) b.pendingOpens.push(slot);
    else writeOpens(b, [slot]);
    if (slot.openAsync && !slot.closed) {
      slot.fenced = true;
      slot.fenceId = OPEN_FENCE;
      b.host.metrics.fencedSlots++;
    }
    return Promise.resolve(slot);
  }
  // The ack's settlers live on the slot (a map entry and a closure per open were measurable).
  const acked = new Promise<EgressSlot>((resolve, reject) => {
    slot.openResolve = resolve;
    slot.openReject = reject;
  });
  if (b.parked) b.pendingOpens.push(slot);
  else writeOpens(b, [slot]);
  return acked;
}

/** Each OpenSlot goes out in a batch of its own: flush before, stage, flush after. */
function writeOpens(b: Batcher, slots: EgressSlot[]): void {
  b.flush();
  if (b.parked) {
    b.pendingOpens.push(...slots);
    return;
  }
  b.begin();
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i]!;
    if (slot.closed) continue;
    if (!b.fits(RECORD_HEADER_LEN + 16, false)) {
      b.flush();
      if (b.parked) {
        b.pendingOpens.push(...slots.slice(i));
        return;
      }
      b.begin();
    }
    // Opens queued behind a parked write share batches of their own: no data can overtake them.
    b.enc.appendOpenSlot(slot.id, 0, slot.anchorId, slot.sessionId);
    b.typeCounts[RecordType.OpenSlot]! += 1;
    b.gate.onStage(b.host.runtime.now(), StagedKind.Urgent);
    b.host.metrics.stagedRecords++;
    b.opens.push(slot);
    slot.opening = false;
  }
  b.flush();
}

/** At a wake: write the opens queued behind the parked write, then let waiting attaches in. */
export function writeWaitingOpens(b: Batcher): void {
  if (b.pendingOpens.length > 0) {
    const opens = b.pendingOpens;
    b.pendingOpens = [];
    writeOpens(b, opens);
  }
  // Room in the open queue: let waiting opens in (they write now or queue again).
  while (b.openRoom.length > 0 && !(b.parked && b.pendingOpens.length >= OPEN_QUEUE_DEPTH)) b.openRoom.shift()!.retry();
}

// ───────────────────────── closing ─────────────────────────

/**
 * Close `slot` with a CloseSlot{`reason`} after its last staged record (the producer left, or its
 * stream failed with `error`), then close it locally. A flush that parks leaves it for a wake.
 */
export function emitClose(b: Batcher, slot: EgressSlot, reason: CloseReason, error: LanemuxError | null): void {
  if (error !== null && slot.closeError === null) slot.closeError = error;
  if (!b.enc.isOpen) b.begin();
  if (!b.fits(CLOSE_RECORD_LEN, false)) {
    b.flush();
    if (b.parked) {
      b.markReady(slot);
      return;
    }
    b.begin();
  }
  b.enc.appendCloseSlot(slot.id, slot.nextSeq, reason);
  slot.nextSeq = (slot.nextSeq + 1) >>> 0;
  b.typeCounts[RecordType.CloseSlot]! += 1;
  b.gate.onStage(b.host.runtime.now(), StagedKind.Urgent);
  b.host.metrics.stagedRecords++;
  closeSlotLocally(
    b,
    slot,
    slot.closeError ?? new MuxError('ERR_SLOT_CLOSED', `${formatSlotId(slot.id)} closed: the producer left`),
    false,
  );
  b.wake(WakeSource.inlet_closed);
}

/**
 * Close a slot on this side: free the index (LIFO), bump its generation, drop its withheld
 * records and fail its producer (unless a terminal went out).
 */
export function closeSlotLocally(
  b: Batcher,
  slot: EgressSlot,
  error: LanemuxError | null,
  terminalSent: boolean,
): void {
  if (slot.closed) return;
  slot.closed = true;
  // After a terminal (nearly every stream's end) one shared error marks the slot closed: building
  // an Error per stream (its stack trace) cost ~9 µs, a fifth of a stream's whole open/close.
  slot.closeError = error ?? STREAM_ENDED;
  if (slot.fenced) {
    slot.fenced = false;
    slot.fenceId = 0;
    b.host.metrics.fencedSlots--;
  }
  const m = b.host.metrics;
  m.withheldRecords -= slot.clearQueue();
  b.slotTable.release(slot);
  b.ended.add(slot.id, slot.sessionId);
  b.liveSlots--;
  m.liveSlots--;
  slot.failWaiters(slot.closeError);
  const reject = slot.openReject;
  if (reject !== null) {
    slot.openResolve = slot.openReject = null;
    reject(slot.closeError);
  }
  if (!terminalSent) slot.owner.onRetired('Discarded');
  slot.owner.onSlotClosed(terminalSent ? null : error);
}

/** The close marker of a slot that sent its terminal (shared: it carries no per-stream detail). */
const STREAM_ENDED = new MuxError('ERR_STREAM_ENDED', 'the stream already sent its terminal');
