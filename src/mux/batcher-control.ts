/**
 * Control on a batcher's lane, applied at a wake from its coalesced inbox (control-inbox.ts): owned
 * control acts on this side's slots (a consumer's lifecycle, closes, grants, singleton
 * resolutions); peer replies (credit, closes, rejects, lifecycle for slots this node receives) are
 * staged as records of the open batch, one CreditUpdate per slot per batch (docs/protocol.md
 * §10.7). Functions over the batcher's state (see batcher.ts): one call per reply, as before.
 */
import { type CloseReason, LifecycleAction, RECORD_HEADER_LEN, RecordType } from '../wire/constants.ts';
import { formatSlotId } from '../wire/slot-id.ts';
import type { Batcher } from './batcher.ts';
import { closeSlotLocally } from './batcher-slots.ts';
import type { InboxDrain } from './control-inbox.ts';
import { peerCloseError } from './egress-record.ts';
import { MuxError } from './errors.ts';
import { StagedKind } from './flush-gate.ts';

/**
 * What peer replies are staged into: a batcher's open batch, or a client's reply lane
 * (reply-lane.ts), which writes replies only.
 */
export interface ReplyStager {
  readonly host: Batcher['host'];
  readonly enc: Batcher['enc'];
  readonly gate: Batcher['gate'];
  readonly inbox: Batcher['inbox'];
  readonly parked: boolean;
  readonly creditAt: Map<number, number>;
  readonly typeCounts: Uint32Array;
  replies: number[];
  leftoverCredit: number[];
  begin(): void;
  fits(needed: number, pair: boolean): boolean;
  flush(): void;
}

/** A LifecycleSlot record: header + session id + action. */
const LIFECYCLE_RECORD_LEN = RECORD_HEADER_LEN + 9;

/**
 * One wake's inbox drain: peer replies staged first, then owned control applied to this batcher's
 * slots (lifecycle, then closes and grants), then a posted retirement.
 */
export function applyInbox(b: Batcher): void {
  const d = b.inbox.drain();
  if (d.kicked) b.kicked = true;
  stageReplies(b, d);
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
  for (const [id, e] of d.owned) {
    const slot = b.slotFor(id);
    if (!slot) continue;
    if (e.close >= 0) {
      closeSlotLocally(b, slot, peerCloseError(slot, e.close), false);
      continue;
    }
    if (e.resolution === 2) {
      b.epochDeath(new MuxError('ERR_EPOCH_DEATH', `singleton for ${formatSlotId(id)} failed: ${e.resolutionError}`));
      return;
    }
    if (e.resolution === 1 && slot.fenced && (e.resolutionId === 0 || e.resolutionId === slot.fenceId)) {
      slot.fenced = false;
      slot.fenceId = 0;
      b.host.metrics.fencedSlots--;
    }
    if (e.credit > 0) slot.ledger.grant(e.credit);
    b.markReady(slot);
  }
  if (d.retire) {
    const left = b.retire(undefined, true);
    if (left.credit.length > 0) b.host.repostCredit(b.peer, b.lane, left.credit);
  }
}

/**
 * Peer replies: CreditUpdate first, then CloseSlot/RejectSlot, then lifecycle. A cancel's
 * CloseSlot{UnknownSlot} and LifecycleSlot{cancel} go as a pair in one batch (docs/protocol.md §10.3): the producer
 * then applies both in one drain, lifecycle first, even when the replies fill several batches.
 */
export function stageReplies(b: ReplyStager, d: InboxDrain): void {
  const now = b.host.runtime.now();
  for (const [peerSlot, e] of d.replies)
    if (e.credit > 0) stageControl(b, now, RecordType.CreditUpdate, peerSlot, e.credit, 0n);
  const lifecycles = d.lifecycleReplies;
  if (lifecycles.size > 0 && d.replies.size > 0) {
    for (const [key, l] of lifecycles) {
      const r = l.cancel ? d.replies.get(l.slot) : undefined;
      if (r === undefined || r.close < 0) continue;
      stageControl(b, now, RecordType.CloseSlot, l.slot, r.close, 0n, LIFECYCLE_RECORD_LEN);
      stageControl(b, now, RecordType.LifecycleSlot, l.slot, LifecycleAction.Cancel, l.session);
      r.close = -1;
      lifecycles.delete(key);
    }
  }
  for (const [peerSlot, e] of d.replies)
    if (e.close >= 0) stageControl(b, now, RecordType.CloseSlot, peerSlot, e.close, 0n);
  for (const [peerSlot, reason] of d.rejects) stageControl(b, now, RecordType.CloseSlot, peerSlot, reason, 0n);
  for (const l of lifecycles.values()) {
    stageControl(
      b,
      now,
      RecordType.LifecycleSlot,
      l.slot,
      l.cancel ? LifecycleAction.Cancel : LifecycleAction.Stop,
      l.session,
    );
  }
}

/**
 * Stage a reply record (frame_seq 0, the peer's SlotId). `pairBytes`: room kept for one more
 * record of that size, so the record that follows shares this batch. A CreditUpdate for a slot the
 * open batch already credits is added into that record: one per slot per batch (docs/protocol.md §10.7).
 */
function stageControl(
  b: ReplyStager,
  now: number,
  type: number,
  peerSlot: number,
  value: number,
  session: bigint,
  pairBytes = 0,
): void {
  if (type === RecordType.CreditUpdate && !b.parked && b.enc.isOpen) {
    const at = b.creditAt.get(peerSlot);
    if (at !== undefined && b.enc.addToCreditUpdate(at, value)) {
      b.replies.push(peerSlot, value);
      return;
    }
  }
  const body = type === RecordType.CreditUpdate ? 4 : type === RecordType.CloseSlot ? 1 : 9;
  if (!b.parked && !b.enc.isOpen) b.begin();
  if (b.parked || !b.fits(RECORD_HEADER_LEN + body + pairBytes, pairBytes > 0)) {
    b.flush();
    if (b.parked) {
      // Taken from the inbox but not stageable until admission: post it back (coalesced, never
      // lost); a retiring batcher's closed inbox hands credit to its replacement instead.
      if (type === RecordType.CreditUpdate) {
        if (!b.inbox.postReplyCredit(peerSlot, value)) b.leftoverCredit.push(peerSlot, value);
      } else if (type === RecordType.CloseSlot) b.inbox.postReplyClose(peerSlot, value);
      else b.inbox.postReplyLifecycle(peerSlot, session, value === LifecycleAction.Cancel);
      return;
    }
    b.begin();
  }
  if (type === RecordType.CreditUpdate) {
    b.creditAt.set(peerSlot, b.enc.byteLength);
    b.enc.appendCreditUpdate(peerSlot, 0, value);
    b.replies.push(peerSlot, value);
  } else if (type === RecordType.CloseSlot) {
    b.enc.appendCloseSlot(peerSlot, 0, value as CloseReason);
  } else {
    b.enc.appendLifecycleSlot(peerSlot, 0, session, value as LifecycleAction);
  }
  b.typeCounts[type]! += 1;
  b.gate.onStage(now, type === RecordType.CreditUpdate ? StagedKind.CreditReply : StagedKind.Urgent);
  b.host.metrics.stagedRecords++;
}
