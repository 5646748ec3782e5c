/**
 * The batcher's part in resume (docs/protocol.md §8.3): its lane's replay log (replay-log.ts) is
 * appended as records are staged, confirmed by a PING behind each written batch, and handed back to
 * its streams when the link is lost. Functions over the batcher's state (see batcher.ts); only
 * {@link logRecord} is on the record path.
 */
import type { Batcher } from './batcher.ts';
import { EgressKind, type EgressSlot } from './egress-slot.ts';
import { nextReplayRound, ReplayLog, type ReplayOwner } from './replay-log.ts';

/** Keep a staged record of `owner`'s stream until the consumer is known to have it. */
export function logRecord(b: Batcher, owner: ReplayOwner, kind: number, value: unknown): void {
  let log = b.replayLog;
  if (log === null) {
    const hooks = b.host.replay;
    if (hooks == null) return; // no resume on this node: nothing owns a log
    b.replayLog = log = new ReplayLog(hooks.budget);
  }
  log.append(
    owner,
    kind,
    value,
    kind === EgressKind.ItemString ? (value as string).length : (value as Uint8Array).byteLength,
  );
}

/**
 * A batch that carried the log's entries before `mark` was handed to the link: once a PING sent
 * after it on the lane is answered, the consumer has them. One PING is in flight per lane; batches
 * written meanwhile wait for the next one.
 */
export function replayWritten(b: Batcher, mark: number): void {
  const log = b.replayLog;
  if (log === null || mark <= log.first) return;
  if (b.replayPinging) {
    if (mark > b.replayNextMark) b.replayNextMark = mark;
    return;
  }
  const hooks = b.host.replay;
  if (hooks == null || b.retired) return;
  const sent = hooks.ping(b.peer, b.lane);
  // Only a PING on the link that carried the batches speaks for them.
  if (sent === undefined || (b.linkEpoch !== undefined && sent.epoch !== b.linkEpoch)) return;
  b.replayPinging = true;
  const generation = log.generation;
  const settle = (ok: boolean): void => {
    b.replayPinging = false;
    if (b.replayLog !== log || log.generation !== generation) return;
    if (ok) log.confirm(mark);
    const next = b.replayNextMark;
    b.replayNextMark = 0;
    if (next > mark) replayWritten(b, next);
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
    b.replayLog.handOut(round, reached);
    b.replayPinging = false;
    b.replayNextMark = 0;
  }
  b.writeReplayMark = 0;
  for (const s of b.slotTable.values()) recoverQueue(s, round, reached);
  for (const s of b.pendingOpens) recoverQueue(s, round, reached);
  for (const o of reached) o.recovered(false);
}

/** `slot`'s stream leaves the log for its own ring (a record of it goes by rendezvous, off the lane). */
export function leaveReplayLog(b: Batcher, slot: EgressSlot): void {
  const owner = slot.replay;
  if (owner === null) return;
  slot.replay = null;
  b.replayLog?.handOutOne(owner);
  recoverQueue(slot, nextReplayRound(), []);
  owner.recovered(true);
}

function recoverQueue(s: EgressSlot, round: number, reached: ReplayOwner[]): void {
  const owner = s.replay;
  if (owner === null || s.closed) return;
  if (owner.replayRound !== round) {
    owner.replayRound = round;
    reached.push(owner);
  }
  for (let i = s.qHead; i < s.qKind.length; i++) {
    const kind = s.qKind[i]!;
    if (kind !== EgressKind.Terminal) owner.recover(kind, s.qValue[i]);
  }
}
