/**
 * The batcher's part in resume (docs/protocol.md §8.3): its lane's replay log (replay-log.ts) is
 * appended as records are staged, confirmed by a PING behind each written batch, and handed back to
 * its streams when the link is lost. Functions over the batcher's state (see batcher.ts); only
 * {@link logRecord} is on the record path.
 */
import type { Batcher } from './batcher.ts';
import { EgressKind, type EgressSlot } from './egress-slot.ts';
import { nextReplayRound, ReplayLog, type ReplayOwner } from './replay-log.ts';

/**
 * Keep the record of `owner`'s stream just staged until the consumer is known to have it: its encoded
 * body, where it sits in the open batch, copied out with the rest of the batch's when the batch is
 * written ({@link sealReplay}), never the item itself by reference: a fresh token (a new string or bytes
 * per token, as an engine makes them) kept by reference lived through the PING round trip, and every
 * young collection meanwhile copied it (with fresh 64-byte tokens at 1,024 streams the log cost 1.41x
 * the CPU per token of resume off: `node --single-threaded bench/inproc.mjs --fresh`, with and without
 * `--resume off`). The stream gets the body back as the record it sends again (the same bytes).
 */
export function logRecord(b: Batcher, owner: ReplayOwner): void {
  let log = b.replayLog;
  if (log === null) {
    const hooks = b.host.replay;
    if (hooks == null) return; // no resume on this node: nothing owns a log
    b.replayLog = log = new ReplayLog(hooks.budget);
  }
  const enc = b.enc;
  log.appendStaged(owner, EgressKind.Body, enc.buffer, b.lastBodyAt, enc.byteLength);
}

/** The open batch is written, or lost: the log copies the bodies it keeps out of it (before the buffer is used again). */
export function sealReplay(b: Batcher): void {
  const log = b.replayLog;
  if (log !== null && log.staged) log.seal(b.enc.buffer);
}

/**
 * Least time between two PINGs of a lane's replay log, ms, unless it holds {@link REPLAY_PING_BYTES}.
 * A PING per batch cost a PONG write and a ping's timer and promise per batch (CPU ×1.3–1.4 with 16
 * peers in lockstep, where a batch holds 16–64 tokens; ×1.26 at 2 ms, ×1.02 at 10 ms). With 16 peers
 * and eight passes in flight, 10 ms still cost 1.16× against 100 ms (250 ms bought nothing more: the
 * byte bound then sets the pace); what the log holds stays bounded by {@link REPLAY_PING_BYTES}.
 */
export const REPLAY_PING_SPACING_MS = 100;
/**
 * Bytes a lane's log may hold before its next PING goes without waiting for the spacing: a busy lane
 * confirms about once per round trip, so what the log holds stays near what one round trip carries.
 */
export const REPLAY_PING_BYTES = 256 * 1024;

/**
 * A batch that carried the log's entries before `mark` was handed to the link: once a PING sent
 * after it on the lane is answered, the consumer has them. One PING is in flight per lane, at most
 * one per {@link REPLAY_PING_SPACING_MS}; batches written meanwhile wait for the next one.
 */
export function replayWritten(b: Batcher, mark: number): void {
  const log = b.replayLog;
  if (log === null || mark <= log.first) return;
  if (mark > b.replayNextMark) b.replayNextMark = mark;
  if (b.replayPinging) return;
  const rt = b.host.runtime;
  const full = log.bytes >= REPLAY_PING_BYTES;
  if (b.replayTimer !== null) {
    if (!full) return;
    rt.clearTimer(b.replayTimer);
    b.replayTimer = null;
  }
  const wait = full ? 0 : b.replayPingAt + REPLAY_PING_SPACING_MS - rt.now();
  if (wait > 0) {
    b.replayTimer = rt.setTimer(() => {
      b.replayTimer = null;
      pingNow(b);
    }, wait);
    return;
  }
  pingNow(b);
}

/** PING behind everything written up to `replayNextMark`. */
function pingNow(b: Batcher): void {
  const log = b.replayLog;
  const mark = b.replayNextMark;
  const hooks = b.host.replay;
  if (log === null || mark <= log.first || hooks == null || b.retired) return;
  const sent = hooks.ping(b.peer, b.lane);
  // Only a PING on the link that carried the batches speaks for them. Without one, the mark waits
  // for the next write (or the link's end hands the records back).
  if (sent === undefined || (b.linkEpoch !== undefined && sent.epoch !== b.linkEpoch)) return;
  b.replayNextMark = 0;
  b.replayPinging = true;
  b.replayPingAt = b.host.runtime.now();
  const generation = log.generation;
  const settle = (ok: boolean): void => {
    if (b.replayLog !== log || log.generation !== generation) return;
    b.replayPinging = false;
    if (ok) log.confirm(mark);
    // Unanswered (the peer slow past the deadline): the next PING speaks for these records too.
    else if (b.replayNextMark < mark) b.replayNextMark = mark;
    // Batches written meanwhile (a mark already confirmed is a no-op there).
    if (b.replayNextMark > 0) replayWritten(b, b.replayNextMark);
  };
  sent.answer.then(
    () => settle(true),
    () => settle(false),
  );
}

/**
 * The link is lost (epoch death, the peer gone, retirement): every stream the log and the withheld
 * queues hold records of gets them back, oldest first — the log's (staged, so older), then its
 * slot's withheld ones — and then `recovered()`, before any slot closes.
 */
export function recoverReplay(b: Batcher): void {
  const round = nextReplayRound();
  const reached: ReplayOwner[] = [];
  if (b.replayLog !== null) {
    sealReplay(b);
    b.replayLog.handOut(round, reached);
    b.replayPinging = false;
    b.replayNextMark = 0;
  }
  if (b.replayTimer !== null) {
    b.host.runtime.clearTimer(b.replayTimer);
    b.replayTimer = null;
  }
  b.writeReplayMark = 0;
  // Every live slot is in the table, those whose OpenSlot waits for a parked write too.
  for (const s of b.slotTable.values()) {
    const owner = s.replay;
    if (owner === null || s.closed) continue;
    if (owner.replayRound !== round) {
      owner.replayRound = round;
      reached.push(owner);
    }
    recoverQueue(s, owner);
  }
  for (const o of reached) o.recovered(false);
}

/** `slot`'s stream leaves the log for its own ring (a record of it goes by rendezvous, off the lane). */
export function leaveReplayLog(b: Batcher, slot: EgressSlot): void {
  const owner = slot.replay;
  if (owner === null) return;
  slot.replay = null;
  sealReplay(b);
  b.replayLog?.handOutOne(owner);
  // Then what waits behind the rendezvous record (that record too, when it comes from the queue).
  recoverQueue(slot, owner);
  owner.recovered(true);
}

/** `s`'s withheld records, oldest first, to `owner` (its terminal is the stream's own to send again). */
function recoverQueue(s: EgressSlot, owner: ReplayOwner): void {
  for (let i = s.qHead; i < s.qTail; i++) {
    const kind = s.qKind[i]!;
    if (kind !== EgressKind.Terminal) owner.recover(kind, s.qValue[i]);
  }
}
