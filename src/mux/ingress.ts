/**
 * The receiver side of one (peer, lane) (docs/protocol.md §10.2, §10.7, §8.1). The batch handler
 * never awaits: it checks epoch, lane, generation and frame_seq, admits credit, and pushes decoded
 * frames into each slot's C+1 buffer (or the hold, when ahead of sequence). Credit returns only
 * when the consumer takes a record.
 *
 * One state machine per slot (open → delivering, holding ahead of sequence, close deferred behind
 * a gap or a staged record → retired) over the table's shared epoch, hold budgets and window, hence
 * one class: a record's every step reads the table's private state, so it stays here, on the hot
 * path, with no call out per record. Beside it: the slot's own state in ingress-slot.ts, the peer
 * window it charges in ingress-window.ts, the slot table slot-table.ts, the bind it fills bind.ts.
 */
import type { AutoWindow } from '../credit/auto-window.ts';
import { type ByteBudget, reservePair, releasePair } from '../credit/byte-budget.ts';
import { CreditClass } from '../credit/classify.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import { DropReason } from '../metrics/mux-metrics.ts';
import type { PeerId } from '../messenger/types.ts';
import { CloseReason, MPSC_ANCHOR_BIT, RecordType } from '../wire/constants.ts';
import type { BatchReader } from '../wire/decoder.ts';
import { FrameKind, decodeRecordAt, readTokenAt } from '../wire/frame.ts';
import { GIVE_UP, readItemAt } from '../wire/plain-item.ts';
import type { DecodedFrame } from '../wire/frame.ts';
import { seqGap, seqNewer } from '../wire/seq.ts';
import { slotIndex } from '../wire/slot-id.ts';
import type { Bind, BindEnd, BoundSlot } from './bind.ts';
import { EndedSlots } from './ended-slots.ts';
import { IngressSlot } from './ingress-slot.ts';
import { HEARTBEAT_BODY, INERT_WINDOW, type IngressWindow, releaseRecord, releaseUnkept } from './ingress-window.ts';
import { MAX_QUEUED_TRANSFERS } from './rendezvous.ts';
import { SlotTable } from './slot-table.ts';
import { ReusedList } from './reused-list.ts';

/** Receiver bound: indices per (peer, lane) table. */
export const MAX_INGRESS_SLOTS_PER_PEER = 65_536;

/**
 * The largest batch_seq gap one batch may add to `batch_seq_gaps_total`. Honest gaps are singleton
 * batches still being pulled when the lane's next batch lands, and a receiver queues at most this
 * many transfers per peer; a larger jump is counted once in `batch_seq_jumps_total` instead, so a
 * peer cannot inflate the gap counter by 2^31 per batch.
 */
export const MAX_PLAUSIBLE_SEQ_GAP = MAX_QUEUED_TRANSFERS;

/** What an ingress table needs from its mux. */
export interface IngressHost {
  readonly metrics: MuxMetrics;
  /**
   * An unclaimed bind for (anchor, session) that `peer` may claim, if any: an attach bind only from
   * the peer it was answered to, a pre-bind from any peer holding its (secret) session.
   */
  findBind(anchorId: bigint, sessionId: bigint, peer: PeerId): Bind | undefined;
  /** The bind was claimed by an OpenSlot (or its slot ended): bookkeeping (lane load, accept queue). */
  bindClaimed(bind: Bind): void;
  bindEnded(bind: Bind, end: BindEnd): void;
  /**
   * An OpenSlot names an attach bind its consumer cancelled before the OpenSlot arrived: answer it
   * with the cancel (CloseSlot{UnknownSlot} + LifecycleSlot{cancel} on `lane`) and return true.
   * False (or absent): no such bind, the claim is refused as usual.
   */
  claimCancelled?(anchorId: bigint, sessionId: bigint, peer: PeerId, lane: number, slot: number): boolean;
  /** Post a reply for a slot this side's ingress holds (credit or close), on the arrival lane. */
  replyCredit(peer: PeerId, lane: number, peerSlot: number, delta: number): void;
  replyClose(peer: PeerId, lane: number, peerSlot: number, reason: number): void;
  replyReject(peer: PeerId, lane: number, peerSlot: number, reason: number): void;
  /** Control addressed to a slot this node owns: credit, peer close, lifecycle. */
  ownedCredit(peer: PeerId, lane: number, slot: number, delta: number): void;
  ownedClose(peer: PeerId, lane: number, slot: number, reason: number): void;
  ownedLifecycle(peer: PeerId, lane: number, slot: number, session: bigint, cancel: boolean): void;
  /** A consumer drained a slot of this table: ring the doorbell (at most once per floor). */
  ringDoorbell(table: IngressTable): void;
  /** The clock and the credit auto-tuning switch (both absent: static credit). */
  readonly runtime?: { now(): number };
  readonly config?: { readonly autoCredit: boolean };
}

const scratchFrame: DecodedFrame = { kind: 0, value: undefined, terminal: false };

/** The ingress table of one (peer, lane). */
export class IngressTable {
  readonly peer: PeerId;
  readonly lane: number;
  readonly peerBudget: ByteBudget;
  readonly #host: IngressHost;
  /** Received slots at the ids the peer chose (this side never allocates). */
  readonly #slots = new SlotTable<IngressSlot>();
  /**
   * Slots moved aside by a reused index: their close arrived but waits behind a rendezvous record
   * still being pulled (docs/protocol.md §8.1 "Index reuse"). Keyed by full SlotId.
   */
  #aside: Map<number, IngressSlot> | null = null;
  /** Slots retired moments ago: their late records are stragglers, not drops (docs/protocol.md §10.9). */
  readonly ended = new EndedSlots();
  liveSlots = 0;
  /** @internal Every live slot of the table (the simulator's credit check reads their accounts). */
  liveSlotsNow(): IterableIterator<IngressSlot> {
    return this.#slots.values();
  }
  #hasEpoch = false;
  #epochHi = 0;
  #epochLo = 0;
  #hasMark = false;
  #seqMark = 0;
  /** Dirty set: slots the consumer drained since their last reconcile. */
  dirty: IngressSlot[] = [];
  /** The doorbell is rung and not yet answered. */
  doorbellPending = false;
  /** Time of the last doorbell visit (for the floor). */
  lastVisit = Number.NEGATIVE_INFINITY;
  /** Slots the batch being applied touched (reconciled after it). */
  readonly #touched = new ReusedList<IngressSlot>();
  /** The peer's receive window on its current link (the mux keeps it current). */
  window: IngressWindow = INERT_WINDOW;
  /**
   * While a staged (rendezvous) batch is applied: the part of its length not yet charged. The
   * sender charged the whole singleton batch, so what is not kept is released when it is done.
   */
  #stagedRest = -1;
  /** The clock reading shared by the current pass over the slots (-1: not read yet in this pass). */
  #passNow = -1;

  /** The clock of credit auto-tuning, or null when credit is static (`mux.autoCredit: false`). */
  readonly clock: { now(): number } | null;

  constructor(host: IngressHost, peer: PeerId, lane: number, peerBudget: ByteBudget) {
    this.#host = host;
    this.clock = host.config?.autoCredit === true && host.runtime !== undefined ? host.runtime : null;
    this.peer = peer;
    this.lane = lane;
    this.peerBudget = peerBudget;
  }

  /** Every live slot (those moved aside included). */
  *slots(): IterableIterator<IngressSlot> {
    yield* this.#slots.values();
    if (this.#aside !== null) yield* [...this.#aside.values()];
  }

  /** The epoch this table follows (for a staged transfer's `<epoch>:<slot>:<session>`). */
  get epoch(): bigint | undefined {
    return this.#hasEpoch ? (BigInt(this.#epochHi) << 32n) | BigInt(this.#epochLo) : undefined;
  }

  /**
   * A staged transfer for (epoch, slot, session) was refused or failed (docs/protocol.md §8.1):
   * the consumer ends with a TransportError carrying `message` (even if a
   * terminal already overtook the record and waits in the hold), and the slot retires at once.
   * Returns false when no live slot matches: a stale refusal does nothing.
   */
  refuseStaged(epoch: bigint, slot: number, session: bigint, message: string): boolean {
    const s = this.#staged(epoch, slot, session);
    if (s === undefined || s.terminalDelivered) return false;
    s.buffer.pushForced(FrameKind.TransportError, message);
    s.terminalDelivered = true;
    // The producer's slot must close too (its LifecycleSlot{cancel} only signals): as a consumer cancel does.
    this.#host.replyClose(this.peer, this.lane, s.id, CloseReason.UnknownSlot);
    this.#retire(s, false, 'dropped');
    return true;
  }

  /** The live slot (aside included) named by a staged transfer, if any. */
  #staged(epoch: bigint, slot: number, session: bigint): IngressSlot | undefined {
    if (this.epoch !== epoch) return undefined;
    const s = this.#slots.get(slot) ?? this.#aside?.get(slot);
    return s !== undefined && !s.closed && s.bind.sessionId === session ? s : undefined;
  }

  /** A rendezvous record for the slot was announced (`+1`) or delivered/refused (`-1`). */
  stagedPendingChanged(epoch: bigint, slot: number, session: bigint, delta: number): void {
    const s = this.#staged(epoch, slot, session);
    if (s !== undefined) s.stagedPending = Math.max(0, s.stagedPending + delta);
  }

  /** The live slot at an index, if any. */
  slotAt(index: number): IngressSlot | undefined {
    return this.#slots.at(index);
  }

  /**
   * Apply one batch (docs/protocol.md §10.1, §10.2). `reader` must already be reset on the payload and have a header.
   * `staged` is the length of a rendezvous singleton batch (its whole length counts against the
   * peer window), 0 for a batch that came down its lane. Never throws and never awaits.
   */
  handleBatch(reader: BatchReader, staged = 0): void {
    const m = this.#host.metrics;
    if (reader.lane !== this.lane) {
      m.recordsDropped[DropReason.lane_mismatch]! += reader.recordCount;
      releaseUnkept(reader, this.window, staged);
      return;
    }
    const hi = reader.epochHi;
    const lo = reader.epochLo;
    if (!this.#hasEpoch) {
      this.#adopt(hi, lo);
    } else if (hi !== this.#epochHi || lo !== this.#epochLo) {
      const older = hi < this.#epochHi || (hi === this.#epochHi && lo < this.#epochLo);
      if (older) {
        m.recordsDropped[DropReason.stale_epoch]! += reader.recordCount;
        releaseUnkept(reader, this.window, staged);
        return;
      }
      // A newer epoch: the sender's slots of the old one died with it (a lost link). Its SlotIds
      // name other streams now, so no record of the new epoch is a straggler of the old.
      this.retireAll(true);
      this.ended.clear();
      this.#adopt(hi, lo);
    }
    const seq = reader.batchSeq;
    if (!this.#hasMark) {
      if (seq !== 0) this.#countGap(seq);
      this.#hasMark = true;
      this.#seqMark = seq;
    } else if (seqNewer(seq, this.#seqMark)) {
      this.#countGap(seqGap(seq, (this.#seqMark + 1) >>> 0));
      this.#seqMark = seq;
    }
    m.batchesReceived++;
    m.recordsPerBatchReceived.observe(reader.recordCount);
    if (staged > 0) {
      this.#stagedRest = staged;
      while (reader.next()) this.#apply(reader);
      // Headers, the CloseSlot, and records not kept: released now (a decode error releases the rest too).
      if (this.#stagedRest > 0) this.window.dropped(this.#stagedRest);
      this.#stagedRest = -1;
    } else while (reader.next()) this.#apply(reader);
    // Reconcile what this batch touched plus the dirty set: tail credit rides this arrival.
    const touched = this.#touched;
    this.#passNow = -1;
    for (let i = 0; i < touched.length; i++) {
      const s = touched.at(i);
      s.touched = false;
      if (!s.closed && !this.#quiet(s)) this.reconcile(s);
    }
    touched.clear();
    if (this.dirty.length > 0) this.visitDirty();
  }

  /**
   * Whether reconciling `s` after a batch would only move counts: no grant can be due and tuning has nothing to
   * decide. In the decode shape a batch carries one record per stream, so the visit ran once per token and granted
   * once per C/2 of them. While no grant is reachable (`grantReachable`: releasing the taken records would not make
   * one due), the drained records wait in `drained` for the next visit, which counts them all (the
   * buffered bytes they free are counted there too, so until then the watermark sees more, never less). Auto-tuning
   * then judges the records of several batches at once, as it does those of one batch.
   */
  #quiet(s: IngressSlot): boolean {
    if (s.grantReachable || s.listed) return false;
    if (s.auto === null) return true;
    return !s.probing && s.drainedBytes <= s.drained * s.tunedSize && s.untunedRecords + s.drained < s.epochLeft;
  }

  /** One batch adds at most {@link MAX_PLAUSIBLE_SEQ_GAP} to the gap counter; a larger jump counts once. */
  #countGap(gap: number): void {
    const m = this.#host.metrics;
    if (gap > MAX_PLAUSIBLE_SEQ_GAP) m.batchSeqJumps++;
    else m.batchSeqGaps += gap;
  }

  #adopt(hi: number, lo: number): void {
    this.#hasEpoch = true;
    this.#epochHi = hi;
    this.#epochLo = lo;
    this.#hasMark = false;
  }

  #touch(s: IngressSlot): void {
    if (!s.touched) {
      s.touched = true;
      this.#touched.push(s);
    }
  }

  #apply(r: BatchReader): void {
    const m = this.#host.metrics;
    const type = r.type;
    const id = r.slot;
    switch (type) {
      case RecordType.OpenSlot:
        this.#open(id, r.frameSeq, r.anchorId(), r.sessionId());
        return;
      case RecordType.CreditUpdate:
        this.#host.ownedCredit(this.peer, this.lane, id, r.creditDelta);
        return;
      case RecordType.LifecycleSlot:
        this.#host.ownedLifecycle(this.peer, this.lane, id, r.sessionId(), r.lifecycleAction === 1);
        return;
      case RecordType.CloseSlot: {
        const reason = r.closeReason;
        if (reason === CloseReason.UnknownSlot || reason === CloseReason.ProtocolError) {
          this.#host.ownedClose(this.peer, this.lane, id, reason);
          return;
        }
        const s = this.#lookup(id, type);
        if (!s) return;
        if (seqNewer(r.frameSeq, s.nextSeq)) {
          s.pendingCloseSeq = r.frameSeq;
          s.pendingCloseReason = reason;
          return;
        }
        this.#retire(s, reason !== CloseReason.TerminalSent, null);
        return;
      }
      default: {
        // Data or SlotHeartbeat.
        const s = this.#lookup(id, type);
        if (!s) {
          this.#unkept(r, this.window);
          return;
        }
        const seq = r.frameSeq;
        if (seq !== s.nextSeq && !seqNewer(seq, s.nextSeq)) {
          m.recordsDropped[DropReason.duplicate]! += 1;
          this.#unkept(r, s.window);
          return;
        }
        let kind: number;
        let terminal: boolean;
        let value: unknown;
        const bytes = r.bodyLength;
        if (type === RecordType.SlotHeartbeat) {
          kind = FrameKind.Heartbeat;
          terminal = false;
          value = undefined;
        } else {
          const token = readTokenAt(r.payload, r.bodyOffset, r.bodyOffset + bytes, s.items);
          const item = token === undefined ? readItemAt(r.payload, r.bodyOffset, r.bodyOffset + bytes) : token;
          if (item !== GIVE_UP) {
            kind = FrameKind.Item;
            terminal = false;
            value = item;
          } else {
            kind = decodeRecordAt(r.payload, r.bodyOffset, r.bodyOffset + bytes, scratchFrame, s.items);
            terminal = scratchFrame.terminal;
            value = scratchFrame.value;
            scratchFrame.value = undefined;
          }
        }
        // Every Data body but the heartbeat counts against the peer window, as the sender counts it.
        const charged = type === RecordType.Data && !(kind === FrameKind.Heartbeat && bytes === HEARTBEAT_BODY);
        const w = s.window;
        // A second copy of a record already held is a duplicate, not a second admission.
        if (seq !== s.nextSeq && s.hold !== null && s.hold.has(seq)) {
          m.recordsDropped[DropReason.duplicate]! += 1;
          if (charged) this.#drop(w, bytes);
          return;
        }
        if (charged && w.overruns(bytes)) {
          // The peer advertised a window, so it knows ours: past it plus one batch, it ignores it.
          m.peerWindowOverrun++;
          this.#drop(w, bytes);
          this.fault(s, CloseReason.ProtocolError);
          return;
        }
        const cls = terminal ? CreditClass.Terminal : CreditClass.Data;
        if (s.admit(cls) !== 'ok') {
          // Ahead of sequence, an overspend is the hold exceeding the credit.
          if (seq !== s.nextSeq) m.holdOverflow++;
          if (charged) this.#drop(w, bytes);
          this.fault(s, CloseReason.ProtocolError);
          return;
        }
        if (seq !== s.nextSeq) {
          this.#touch(s);
          const reserved = s.stagedPending === 0;
          if (reserved && reservePair(s.holdBudget, this.peerBudget, bytes) !== 'ok') {
            m.holdOverflow++;
            if (charged) this.#drop(w, bytes);
            this.fault(s, CloseReason.ProtocolError);
            return;
          }
          if (charged) this.#charge(w, bytes);
          (s.hold ??= new Map()).set(seq, { kind, value, terminal, bytes, reserved, charged });
          m.heldRecords++;
          return;
        }
        // In order: a reader waiting on the empty slot takes it at once (never held: the window gets
        // its bytes back as for a record not kept), else it is charged and buffered.
        if (kind === FrameKind.Item && this.#direct(s, value, bytes)) {
          if (charged) this.#drop(w, bytes);
          if (s.closed) return;
        } else {
          if (charged) this.#charge(w, bytes);
          if (!this.#push(s, kind, value, terminal, bytes, charged)) return;
        }
        this.#drainHold(s);
        // Listed for the reconcile after the batch only when it would do more than count: judged now, while
        // the slot is in cache (a later record of the slot in this batch judges again), not in a second
        // pass over every slot the batch reached.
        if (!s.touched && !s.closed && !this.#quiet(s)) this.#touch(s);
      }
    }
  }

  /**
   * Checked lookup. A miss naming a slot retired moments ago is a straggler (by record `type`);
   * any other miss (generation mismatch, empty index) is a metered drop.
   */
  #lookup(id: number, type: number): IngressSlot | undefined {
    const s = this.#slots.at(slotIndex(id));
    if (s !== undefined && s.id === id) return s;
    if (this.#aside !== null) {
      const a = this.#aside.get(id);
      if (a !== undefined) return a;
    }
    const m = this.#host.metrics;
    if (this.ended.has(id)) {
      m.straggler(type, this.peer, this.lane);
      return undefined;
    }
    m.noRouteFor(type, this.peer, this.lane);
    if (s === undefined) {
      m.recordsDropped[DropReason.closed_slot]! += 1;
    } else {
      // The index is live at another generation: a stale record.
      m.generationMismatch++;
      m.recordsDropped[DropReason.generation]! += 1;
    }
    return undefined;
  }

  /** A record kept: charged to the peer window (and no longer part of a staged batch's remainder). */
  #charge(w: IngressWindow, bytes: number): void {
    w.charge(bytes);
    if (this.#stagedRest >= 0) this.#stagedRest -= bytes;
  }

  /** A charged-class record not kept or never held: released now (in a staged batch, with the batch's remainder). */
  #drop(w: IngressWindow, bytes: number): void {
    if (this.#stagedRest < 0) w.dropped(bytes);
  }

  /** A record dropped before it was decoded: release its body unless it is a heartbeat. */
  #unkept(r: BatchReader, w: IngressWindow): void {
    if (this.#stagedRest < 0) releaseRecord(r, w);
  }

  /**
   * The next Item of `s`, handed to a reader waiting on its empty buffer, if there is one and it
   * takes it. To the credit laws it was buffered and taken at once (the take is counted on the
   * slot; the record's caller lists the slot for the reconcile after the batch when a grant can fall
   * due, else a later visit counts it). The caller settles the peer window; if the consumer
   * cancelled meanwhile, the slot is retired.
   */
  #direct(s: IngressSlot, value: unknown, bytes: number): boolean {
    const buffer = s.buffer;
    const direct = buffer.direct;
    if (direct === null || buffer.length !== 0 || !direct._direct(buffer, value)) return false;
    s.addBuffered(bytes);
    s.arrivals++;
    s.nextSeq = (s.nextSeq + 1) >>> 0;
    s.drained++;
    s.drainedBytes += bytes;
    return true;
  }

  /** A held record, now in order (already charged): to a waiting reader, else into the slot buffer. */
  #deliver(s: IngressSlot, kind: number, value: unknown, terminal: boolean, bytes: number, charged: boolean): boolean {
    if (kind === FrameKind.Item && this.#direct(s, value, bytes)) {
      if (charged) s.window.release(bytes);
      return !s.closed;
    }
    return this.#push(s, kind, value, terminal, bytes, charged);
  }

  /** Into the slot buffer; `charged` bytes (already charged) go back to the window if that fails. */
  #push(s: IngressSlot, kind: number, value: unknown, terminal: boolean, bytes: number, charged: boolean): boolean {
    const buffer = s.buffer;
    if (!buffer.push(kind, value, bytes, charged)) {
      if (charged) s.window.release(bytes);
      this.#host.metrics.readerStall++;
      this.fault(s, CloseReason.ProtocolError);
      return false;
    }
    s.addBuffered(bytes);
    s.arrivals++;
    s.nextSeq = (s.nextSeq + 1) >>> 0;
    if (terminal) s.terminalDelivered = true;
    return true;
  }

  /** Deliver consecutive held records, then a deferred close that is now due. */
  #drainHold(s: IngressSlot): void {
    const hold = s.hold;
    if (hold !== null && hold.size > 0) {
      const m = this.#host.metrics;
      let h = hold.get(s.nextSeq);
      while (h !== undefined) {
        hold.delete(s.nextSeq);
        m.heldRecords--;
        if (h.reserved) releasePair(s.holdBudget, this.peerBudget, h.bytes);
        if (!this.#deliver(s, h.kind, h.value, h.terminal, h.bytes, h.charged)) return;
        h = hold.get(s.nextSeq);
      }
    }
    if (s.pendingCloseSeq >= 0 && !seqNewer(s.pendingCloseSeq, s.nextSeq)) {
      this.#retire(s, s.pendingCloseReason !== CloseReason.TerminalSent, null);
    }
  }

  #open(id: number, seq: number, anchorId: bigint, sessionId: bigint): void {
    const m = this.#host.metrics;
    const index = slotIndex(id);
    if (index >= MAX_INGRESS_SLOTS_PER_PEER) {
      this.#host.replyReject(this.peer, this.lane, id, CloseReason.ProtocolError);
      return;
    }
    let incumbent = this.#slots.at(index);
    const aside = this.#aside?.get(id);
    if (aside !== undefined) {
      // The generation wrapped onto a slot still waiting aside: records naming this id could belong
      // to either stream. Refuse the new one and fail the old one, so neither gets the other's records.
      m.recordsDropped[DropReason.slot_collision]! += 1;
      this.#host.replyReject(this.peer, this.lane, id, CloseReason.ProtocolError);
      this.#retire(aside, true, null);
      return;
    }
    if (incumbent !== undefined && incumbent.id !== id) {
      if (incumbent.pendingCloseSeq < 0) {
        m.recordsDropped[DropReason.slot_collision]! += 1;
        this.#host.replyReject(this.peer, this.lane, id, CloseReason.ProtocolError);
        return;
      }
      // Its close has arrived, deferred behind a hold: the sender is done with it. Keep it by full id.
      (this.#aside ??= new Map()).set(incumbent.id, incumbent);
      this.#slots.clearAt(index);
      incumbent = undefined;
    }
    const bind = this.#host.findBind(anchorId, sessionId, this.peer);
    if (bind === undefined) {
      if (this.#host.claimCancelled?.(anchorId, sessionId, this.peer, this.lane, id) === true) return;
      // A refused claim touches no bind: an honest stream whose own OpenSlot comes later still claims it.
      m.claimRefused++;
      m.recordsDropped[DropReason.unknown_slot]! += 1;
      this.#host.replyReject(this.peer, this.lane, id, CloseReason.UnknownSlot);
      return;
    }
    // A duplicate open of a live SlotId retires the incumbent through the ordinary close path.
    if (incumbent !== undefined) this.#retire(incumbent, true, null);
    const s = new IngressSlot(id, this, bind, (seq + 1) >>> 0);
    this.#slots.put(s);
    this.liveSlots++;
    m.liveSlots++;
    bind.claim(s, s.window, (bytes) => {
      s.drained++;
      s.drainedBytes += bytes;
      if (!s.listed && !s.closed) {
        s.listed = true;
        this.dirty.push(s);
        if (!this.doorbellPending) {
          this.doorbellPending = true;
          this.#host.ringDoorbell(this);
        }
      }
    });
    this.#host.bindClaimed(bind);
    bind.owner.onClaimed(bind);
    // No CreditUpdate on open: the sender already holds C.
  }

  /** Turn drains into a grant (clear the listing, then swap the count). Runs within a pass over the slots. */
  reconcile(s: IngressSlot): void {
    s.listed = false;
    const n = s.drained;
    const b = s.drainedBytes;
    s.drained = 0;
    s.drainedBytes = 0;
    if (n > 0) s.release(n, b);
    const auto = s.auto;
    if (auto !== null) {
      this.#tune(s, auto, n, b);
      return;
    }
    const grant = s.takeDueGrant();
    if (grant > 0) this.#host.replyCredit(this.peer, this.lane, s.id, grant);
  }

  /**
   * Auto-tuned reconcile (per drain visit or batch, never per record): retarget, resize, grant. The window is
   * decided when a grant falls due (growth rides it; a shrink under memory pressure keeps credit instead of
   * granting it) or when the consumer has drained a window's worth (the moment growth is judged). In between the
   * slot only counts what the consumer took, so with thousands of streams a token does not also touch its
   * stream's tuning state; the clock is read only when it is used.
   */
  #tune(s: IngressSlot, auto: AutoWindow, n: number, b: number): void {
    if (s.arrivals !== s.tunedArrivals) {
      s.tunedArrivals = s.arrivals;
      if (s.probing) {
        auto.arrived(this.#now());
        s.probing = auto.probing;
      }
    }
    // Records larger than the size the window was last capped with count at once (the byte cap must hold for them).
    const rising = b > n * s.tunedSize;
    if (rising || s.untunedRecords + n >= s.epochLeft || s.grantDue) {
      if (s.untunedRecords > 0) auto.consumed(s.untunedRecords, s.untunedBytes);
      if (n > 0) auto.consumed(n, b);
      s.untunedRecords = 0;
      s.untunedBytes = 0;
      const w = s.window;
      const target = auto.retarget(this.#now(), w.fill?.() ?? 0, w.sizeBytes ?? Number.POSITIVE_INFINITY);
      if (target !== s.limit) s.buffer.grow(s.resize(target) + 1);
      s.epochLeft = auto.epochLeft;
      s.tunedSize = auto.recordBytes;
    } else {
      s.untunedRecords += n;
      s.untunedBytes += b;
    }
    const starved = s.remaining === 0;
    const grant = s.takeDueGrant();
    if (grant > 0) {
      if (starved) {
        auto.granted(this.#now(), true);
        s.probing = auto.probing;
      }
      this.#host.replyCredit(this.peer, this.lane, s.id, grant);
    }
  }

  /**
   * The clock, read at most once per pass over the slots: one pass reconciles up to every slot, and
   * all of it happens at one instant as far as tuning can tell. Every {@link reconcile} runs in a pass
   * (an arrival, a doorbell visit, a sweep), and each pass starts by forgetting the last reading.
   */
  #now(): number {
    if (this.#passNow < 0) this.#passNow = this.clock!.now();
    return this.#passNow;
  }

  /** Reconcile every listed slot (doorbell visit or arrival path). */
  visitDirty(): void {
    const dirty = this.dirty;
    this.dirty = [];
    this.#passNow = -1;
    for (let i = 0; i < dirty.length; i++) {
      const s = dirty[i]!;
      if (!s.closed && s.listed) this.reconcile(s);
    }
  }

  /** Periodic walk: reconcile every live slot. Returns the number of slots visited. */
  sweep(): number {
    let n = 0;
    this.#passNow = -1;
    // An index walk: the table's iterator made a result object per slot, per sweep.
    const t = this.#slots;
    for (let i = 0; i < t.length; i++) {
      const s = t.at(i);
      if (s === undefined) continue;
      this.reconcile(s);
      n++;
    }
    if (this.#aside !== null) for (const s of this.#aside.values()) this.reconcile(s);
    return n;
  }

  /** Close a slot for a protocol fault: reply `CloseSlot{reason}` and inject Dropped. */
  fault(s: IngressSlot, reason: number): void {
    this.#host.replyClose(this.peer, this.lane, s.id, reason);
    this.#retire(s, true, null);
  }

  /** The consumer is gone: retire the slot and tell the owner `CloseSlot{UnknownSlot}`. */
  consumerGone(slot: BoundSlot): void {
    if (slot.closed) return;
    // A live slot is in the table or aside; only this table's own can be retired here.
    const s = this.#slots.get(slot.id) ?? this.#aside?.get(slot.id);
    if (s !== slot) return;
    this.#host.replyClose(this.peer, this.lane, s.id, CloseReason.UnknownSlot);
    this.#retire(s, false, 'released');
  }

  /** Watchdog firing: discard unread records, inject Dropped, tell the owner. */
  watchdogFire(s: IngressSlot): void {
    if (s.closed) return;
    // An MPSC anchor's senders never count firings (docs/protocol.md §10.8): bit 63 of the anchor id marks MPSC.
    if ((s.bind.anchorId & MPSC_ANCHOR_BIT) === 0n) this.#host.metrics.watchdogFirings++;
    s.buffer.clear();
    this.#host.replyClose(this.peer, this.lane, s.id, CloseReason.UnknownSlot);
    this.#retire(s, true, null);
  }

  /**
   * Retire every live slot (epoch retired, peer gone, shutdown): one Dropped each, unless
   * (`linkLost`) the owner keeps the stream for a resume. Returns the count.
   */
  retireAll(linkLost = false): number {
    let n = 0;
    for (const s of this.#slots.values()) {
      this.#retire(s, true, null, linkLost);
      n++;
    }
    if (this.#aside !== null) {
      for (const s of [...this.#aside.values()]) {
        this.#retire(s, true, null, linkLost);
        n++;
      }
    }
    return n;
  }

  /** The slot's link is known lost (a resume names it): retire it with no reply, suspended if its owner keeps it. */
  linkLost(slot: BoundSlot): void {
    if (slot.closed) return;
    const s = this.#slots.get(slot.id) ?? this.#aside?.get(slot.id);
    if (s !== slot) return;
    this.#retire(s, true, null, true);
  }

  /**
   * Remove a slot: release held bytes, close its buffer, and inject exactly one Dropped when asked
   * and no terminal was delivered.
   */
  #retire(s: IngressSlot, injectDropped: boolean, end: BindEnd | null, linkLost = false): void {
    if (s.closed) return;
    s.closed = true;
    this.ended.add(s.id, s.bind.sessionId);
    const m = this.#host.metrics;
    if (!this.#slots.remove(s) && this.#aside?.get(s.id) === s) {
      this.#aside.delete(s.id);
      if (this.#aside.size === 0) this.#aside = null;
    }
    this.liveSlots--;
    m.liveSlots--;
    if (s.hold !== null) {
      for (const h of s.hold.values()) {
        if (h.reserved) releasePair(s.holdBudget, this.peerBudget, h.bytes);
        if (h.charged) s.window.release(h.bytes);
        m.heldRecords--;
      }
      s.hold = null;
    }
    const bind = s.bind;
    if (linkLost && injectDropped && !s.terminalDelivered && bind.owner.suspend?.(bind) === true) {
      bind.closeBuffer(false);
      this.#host.bindEnded(bind, 'suspended');
      return;
    }
    const dropped = injectDropped && !s.terminalDelivered;
    bind.closeBuffer(dropped);
    this.#host.bindEnded(bind, end ?? (dropped ? 'dropped' : 'terminal'));
  }
}
