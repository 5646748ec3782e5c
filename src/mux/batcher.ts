/**
 * The egress batcher of one (peer, lane) (docs/protocol.md §10, §8.1; the flush policies of `FlushPolicy`, config.ts).
 *
 * A batcher is the lane's {@link ReplyLane} (reply-lane.ts: the coalesced control inbox, one
 * reusable batch encoder, the flush gate, the wake, the write, parking on admission, epoch death
 * and retirement) plus the slots it opened on that lane, whose records it stages into the same
 * open batch through the reply lane's hooks. Producers stage records synchronously into the open batch when their
 * slot holds credit; otherwise records wait in the slot's withheld FIFO. A write that the
 * transport does not admit at once parks the batcher: nothing is staged until it is admitted, so
 * producers wait on their slots — back-pressure without queues. A refused write is epoch death.
 *
 * This file is the slots' state and the hot path: a record offered, staged or withheld, released
 * when credit returns, and what a wake, a write and its admission do for the slots. The other transitions over the same state
 * are module-level functions beside it, one concept each (a plain call, as a private method was;
 * no sub-object between a record and the encoder):
 * - batcher-slots.ts: a slot's open (the OpenSlot batch, the open queue behind a parked write) and close;
 * - batcher-control.ts: owned control from the inbox drain at a wake (the peer replies: reply-lane.ts);
 * - batcher-window.ts: records waiting for the peer window, and its link;
 * - batcher-singleton.ts: a record over the batch cap, staged for rendezvous;
 * - batcher-retire.ts: epoch death and retirement, for the slots.
 * Hence the state those files act on is plain fields rather than `#private` ones; only the
 * batcher's files write them. What the batcher is given is batcher-host.ts; per-record sizes and
 * appends are egress-record.ts, the flush decision flush-gate.ts, coalesced replies
 * control-inbox.ts (staged by reply-lane.ts), the slot table slot-table.ts.
 */
import type { LanemuxError } from '../errors.ts';
import { WakeSource } from '../metrics/mux-metrics.ts';
import type { PeerId } from '../messenger/types.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import { BATCH_HEADER_LEN, CLOSE_RECORD_LEN, CloseReason, RECORD_HEADER_LEN, RecordType } from '../wire/constants.ts';
import { FRAME_HEARTBEAT, isHeartbeatFrame, itemStringLength } from '../wire/frame.ts';
import type { BatcherHost } from './batcher-host.ts';
import { closeSlotLocally, emitClose, OPEN_FENCE, openEgressSlot, writeWaitingOpens } from './batcher-slots.ts';
import { applyOwned } from './batcher-control.ts';
import { logRecord, replayWritten, sealReplay } from './batcher-replay.ts';
import { endEpoch, retireSlots } from './batcher-retire.ts';
import { emitSingleton, stageRoomReturned } from './batcher-singleton.ts';
import { syncWindow, windowBlock, windowRoom } from './batcher-window.ts';
import { UNBOUNDED_EGRESS, type PeerEgress } from './peer-egress.ts';
import type { InboxDrain } from './control-inbox.ts';
import { EndedSlots } from './ended-slots.ts';
import { EgressKind, type EgressSlot, Offer } from './egress-slot.ts';
import type { EgressSlotOwner, SlotBatcher } from './egress-slot.ts';
import { StagedKind } from './flush-gate.ts';
import type { ReplayLog } from './replay-log.ts';
import { ReplyLane } from './reply-lane.ts';
import { ReadyList } from './ready-list.ts';
import { SlotTable } from './slot-table.ts';
import {
  appendRecord,
  bodyUpperBound,
  EMIT_OK,
  EMIT_PARKED,
  EMIT_TOO_LARGE,
  EMIT_WINDOW,
  recordBytes,
} from './egress-record.ts';

/** The lists of a written batch that carried none (shared: never written to). */
const NO_SLOTS: EgressSlot[] = [];

/** The egress batcher of one (peer, lane): its reply lane plus the slots it opened. */
export class Batcher extends ReplyLane implements SlotBatcher {
  // The state the batcher's files share (see the header): read anywhere, written only by them.
  readonly peerEgress: PeerEgress;
  /** Owned slots by SlotId; freed indexes are reused LIFO at their next generation. */
  readonly slotTable = new SlotTable<EgressSlot>();
  /** Owned slots closed moments ago (shared with the lane's later batchers): late peer control is a straggler. */
  readonly ended: EndedSlots;
  /** Slots whose withheld FIFO may be releasable, in the order they became so (ready-list.ts). */
  readonly readySlots = new ReadyList<EgressSlot>();
  /** Slots opened while parked: their OpenSlot is still to be written (batcher-slots.ts). */
  pendingOpens: EgressSlot[] = [];
  /** Opens waiting for room in the open queue (batcher-slots.ts). */
  openRoom: Array<{ retry: () => void; reject: (e: unknown) => void }> = [];
  // Open batch bookkeeping (beside the reply lane's).
  guards: EgressSlot[] = []; // terminals in the open batch (retirement)
  opens: EgressSlot[] = []; // OpenSlots in the open batch (open acks)
  // The written batch until its admission.
  inflightGuards: EgressSlot[] = NO_SLOTS;
  inflightOpens: EgressSlot[] = NO_SLOTS;
  /** Window bytes charged by the written batch, on link {@link writeWindowEpoch} (given back if it is refused). */
  writeWindowBytes = 0;
  writeWindowEpoch = 0;
  /** Slots whose singleton waits for staging room toward this peer (batcher-singleton.ts). */
  stageBlocked: EgressSlot[] = [];
  /** The link epoch the peer window counts this batcher's records on (0: the transport has none). */
  windowEpoch = 0;
  /** Window bytes charged by the open batch (given back if it is discarded; a written batch's go with its admission). */
  openWindowBytes = 0;
  /** Slots whose head record waits for the peer's window, in the order they blocked (a FIFO with a head; batcher-window.ts). */
  windowBlocked: EgressSlot[] = [];
  windowHead = 0;
  /** Registered with the peer egress for the next release. */
  windowWaiting = false;
  /** The lane's replay log (batcher-replay.ts): made at the first record of a resumable stream. */
  replayLog: ReplayLog | null = null;
  /** A PING behind written batches is out (batcher-replay.ts). */
  replayPinging = false;
  /** The log position the next PING confirms (0: none waits). */
  replayNextMark = 0;
  /** Where the body of the record staged last starts in the open batch (the replay log copies it from there). */
  lastBodyAt = 0;
  /** When the last PING went (the spacing's clock). */
  replayPingAt = Number.NEGATIVE_INFINITY;
  /** The timer of a PING held back by the spacing. */
  replayTimer: TimerHandle | null = null;
  /** The log position the open batch's records end at, once it is written; its admission confirms up to it. */
  writeReplayMark = 0;
  readonly onWindowRoom = (): void => windowRoom(this);
  readonly onStageRoom = (): void => stageRoomReturned(this);

  // Only this file's.
  /**
   * Slots with Data records in the open batch: counted as a slot's first record marks it with the batch's
   * mark, and forgotten by moving the mark on, not by a second pass over every slot the batch carried.
   */
  #dataSlots = 0;
  #batchMark = 1;

  constructor(host: BatcherHost, peer: PeerId, lane: number, ended: EndedSlots = new EndedSlots()) {
    super(host, peer, lane);
    this.ended = ended;
    this.peerEgress = host.peerEgress?.(peer) ?? UNBOUNDED_EGRESS();
    syncWindow(this);
  }

  /**
   * Whether a record counts against the peer window: every Data body but the heartbeat, while the
   * window limits and is this batcher's link's (a stale link's batches are refused anyway).
   */
  windowed(kind: number, value: unknown): boolean {
    if (!this.peerEgress.counts(this.windowEpoch)) return false;
    return kind !== EgressKind.Body || !isHeartbeatFrame(value as Uint8Array);
  }

  /**
   * Open a slot for (anchor, session) holding `credit` (the advertised window). Resolves once the
   * OpenSlot batch is admitted (the awaited open ack), with the slot ready for records.
   */
  openSlot(
    anchorId: bigint,
    sessionId: bigint,
    credit: number,
    owner: EgressSlotOwner,
    slotByteBudget = this.host.config.slotByteBudget,
  ): Promise<EgressSlot> {
    return openEgressSlot(this, anchorId, sessionId, credit, owner, slotByteBudget);
  }

  // ───────────────────────── producer path ─────────────────────────

  /**
   * Offer a record from a producer. Stages it at once when the slot has credit and nothing waits
   * ahead of it; otherwise queues it in the slot's withheld FIFO. Never throws for a closed slot:
   * answers `Offer.Closed`.
   */
  offer(slot: EgressSlot, kind: number, value: unknown): Offer {
    if (slot.closed || slot.closeError !== null) return Offer.Closed;
    if (slot.queued === 0 && !slot.fenced && !slot.opening && !this.parked && this.#affordable(slot, kind)) {
      const r = this.#emit(slot, kind, value);
      if (r === EMIT_OK) {
        // Read after the emit: a record that went by rendezvous took its stream off the log.
        const replay = slot.replay;
        if (replay !== null && kind !== EgressKind.Terminal) logRecord(this, replay);
        if (!this.inWake) this.wake(WakeSource.frame);
        return Offer.Ok;
      }
      if (r === EMIT_TOO_LARGE) return Offer.Closed;
      // EMIT_PARKED (a clamp flush parked us) or EMIT_WINDOW (the peer window is full): queue it.
    }
    return this.#withhold(slot, kind, value);
  }

  #withhold(slot: EgressSlot, kind: number, value: unknown): Offer {
    const m = this.host.metrics;
    // A producer that does not wait for `send()` while paused hits a hard cap, never unbounded memory.
    if (kind !== EgressKind.Terminal && slot.paused && slot.withheldBytes >= 2 * slot.byteBudget) return Offer.Refused;
    if (!slot.starved && !this.#affordable(slot, kind)) {
      slot.starved = true;
      m.slotCreditExhausted++;
    }
    slot.enqueue(kind, value, recordBytes(kind, value));
    m.withheldRecords++;
    // Withheld while parked: the unpark releases it (the ready list, not a walk over every slot).
    if (this.parked) this.markReady(slot);
    // Pause at the byte cap, at the inlet depth (C+1) while parked on admission, while the peer's
    // withheld bytes (all its lanes) are at the peer budget, or past a live feed's depth.
    if (
      slot.withheldBytes >= slot.byteBudget ||
      (this.parked && slot.queued > slot.inletDepth) ||
      this.peerEgress.over ||
      slot.queued > slot.withholdDepth
    ) {
      if (!slot.paused) m.producerSendBackpressure++;
      slot.paused = true;
      return Offer.Wait;
    }
    return Offer.Ok;
  }

  /** A heartbeat goes only when it can go now; a slot without credit or with a backlog drops it. */
  heartbeat(slot: EgressSlot): void {
    if (slot.closed || slot.closeError !== null || slot.queued > 0 || slot.fenced || slot.opening || this.parked)
      return;
    if (slot.ledger.dataAvailable === 0) return;
    if (this.#emit(slot, EgressKind.Body, FRAME_HEARTBEAT) === EMIT_OK && !this.inWake) this.wake(WakeSource.frame);
  }

  /** The producer left without a terminal: a CloseSlot{PeerGone} follows whatever is withheld. */
  depart(slot: EgressSlot): void {
    if (slot.closed || slot.closeOwed) return;
    slot.closeOwed = true;
    if (slot.queued > 0 || slot.fenced || slot.opening || this.parked) {
      this.markReady(slot);
      this.wake(WakeSource.inlet_closed);
      return;
    }
    emitClose(this, slot, CloseReason.PeerGone, null);
  }

  #affordable(slot: EgressSlot, kind: number): boolean {
    return kind === EgressKind.Terminal ? slot.ledger.terminalAvailable : slot.ledger.dataAvailable > 0;
  }

  /**
   * Stage one record of `slot` into the open batch. Returns EMIT_OK, EMIT_PARKED
   * (a clamp flush parked the batcher; nothing staged) or EMIT_TOO_LARGE (the slot was failed).
   */
  #emit(slot: EgressSlot, kind: number, value: unknown): number {
    const terminal = kind === EgressKind.Terminal;
    const body = bodyUpperBound(kind, value);
    const needed = RECORD_HEADER_LEN + body + (terminal ? CLOSE_RECORD_LEN : 0);
    if (BATCH_HEADER_LEN + needed > this.cap) {
      const exact = kind === EgressKind.ItemString ? itemStringLength(value as string) : body;
      const total = BATCH_HEADER_LEN + RECORD_HEADER_LEN + exact + (terminal ? CLOSE_RECORD_LEN : 0);
      if (total > this.cap) return emitSingleton(this, slot, kind, value, terminal, total);
    }
    // The peer window: the bound is checked, the exact body is charged once encoded.
    const windowed = this.windowed(kind, value);
    if (windowed && !this.peerEgress.sendWindow.fits(body)) return windowBlock(this, slot);
    if (!this.enc.isOpen) this.begin();
    if (!this.fits(needed, terminal)) {
      this.flush();
      if (this.parked) return EMIT_PARKED;
      this.begin();
    }
    const seq = slot.nextSeq;
    if (terminal) slot.ledger.spendTerminal();
    else if (slot.ledger.spendData() !== 'ok') return EMIT_PARKED; // guarded by #affordable
    const before = this.enc.byteLength;
    appendRecord(this.enc, slot.id, seq, kind, value);
    this.lastBodyAt = before + RECORD_HEADER_LEN;
    if (windowed) {
      const exact = this.enc.byteLength - before - RECORD_HEADER_LEN;
      this.peerEgress.charge(exact);
      this.openWindowBytes += exact;
    }
    slot.nextSeq = (seq + 1) >>> 0 || 0xffff_ffff;
    this.typeCounts[RecordType.Data]! += 1;
    if (slot.stagedBatch !== this.#batchMark) {
      slot.stagedBatch = this.#batchMark;
      this.#dataSlots++;
    }
    // The clock is read only when the gate needs it (first record of a batch, or a terminal).
    const gate = this.gate;
    let now = 0;
    if (gate.staged === 0 || terminal) {
      now = this.host.runtime.now();
      gate.onStage(now, terminal ? StagedKind.Urgent : StagedKind.Data);
    } else gate.onStageData();
    this.host.metrics.stagedRecords++;
    if (terminal) {
      this.enc.appendCloseSlot(slot.id, slot.nextSeq, CloseReason.TerminalSent);
      slot.nextSeq = (slot.nextSeq + 1) >>> 0;
      this.typeCounts[RecordType.CloseSlot]! += 1;
      this.gate.onStage(now, StagedKind.Urgent);
      this.host.metrics.stagedRecords++;
      slot.terminalStaged = true;
      this.guards.push(slot);
      closeSlotLocally(this, slot, null, true);
    }
    return EMIT_OK;
  }

  /** Release a slot's withheld records while credit, the fence and the batch allow. */
  #release(slot: EgressSlot): void {
    const m = this.host.metrics;
    while (slot.queued > 0 && !slot.closed && !slot.fenced && !this.parked) {
      const kind = slot.qKind[slot.qHead]!;
      if (!this.#affordable(slot, kind)) break;
      const value = slot.qValue[slot.qHead];
      const r = this.#emit(slot, kind, value);
      if (r === EMIT_PARKED || r === EMIT_WINDOW) break;
      if (r === EMIT_TOO_LARGE) return;
      const replay = slot.replay;
      if (replay !== null && kind !== EgressKind.Terminal) logRecord(this, replay);
      if (!slot.closed) {
        slot.shift();
        m.withheldRecords--;
      }
    }
    if (slot.closed) return;
    // A flush in the loop parked the batcher: the unpark takes up the rest.
    if (this.parked && slot.queued > 0) this.markReady(slot);
    if (slot.queued === 0) {
      slot.starved = false;
      if (slot.closeOwed && !slot.fenced && !this.parked) {
        emitClose(this, slot, CloseReason.PeerGone, null);
        return;
      }
    }
    if (
      slot.paused &&
      slot.withheldBytes < slot.byteBudget &&
      !(this.parked && slot.queued > slot.inletDepth) &&
      (slot.queued === 0 || !this.peerEgress.over) &&
      slot.queued <= slot.withholdDepth
    ) {
      slot.resume();
    }
    if (slot.roomWaiter !== null && slot.queued === 0 && !slot.paused && slot.ledger.dataAvailable > 0) slot.wakeRoom();
  }

  /** Queue `slot` for the next wake's release (once). */
  markReady(slot: EgressSlot): void {
    this.readySlots.add(slot);
  }

  /** The owned slot for a SlotId at its live generation, if any. */
  override slotFor(id: number): EgressSlot | undefined {
    return this.slotTable.get(id);
  }

  /** Every live owned slot. */
  override *slots(): IterableIterator<EgressSlot> {
    yield* this.slotTable.values();
  }

  // ─────────────── the reply lane's wake and write, with slots (reply-lane.ts) ───────────────

  /** A wake stages waiting opens, the inbox (replies, then owned control), then released withheld records. */
  protected override stageWake(): void {
    if (this.pendingOpens.length > 0 || this.openRoom.length > 0) writeWaitingOpens(this);
    if (this.parked) return;
    if (this.inbox.pending) this.applyInbox();
    if (this.retired) return;
    // The slots listed now, until a full batch parks the batcher: the rest stay listed, in order, for
    // the wake after the unpark; a slot listed meanwhile (again) waits for the next wake.
    const ready = this.readySlots;
    for (let n = ready.size; n > 0 && !this.parked; n--) this.#release(ready.shift());
  }

  protected override slotsWithData(): number {
    return this.#dataSlots;
  }

  protected override applyOwned(d: InboxDrain): boolean {
    return applyOwned(this, d);
  }

  /**
   * The written batch takes its terminals (retired once admitted), its OpenSlots (acked once
   * admitted) and its window bytes with it. A list moves only when it has any: three fresh arrays
   * per write were a measurable share of a stream's open (its OpenSlot is a batch of its own).
   */
  protected override sealWrite(): void {
    this.resetDataSlots();
    if (this.guards.length > 0) {
      this.inflightGuards = this.guards;
      this.guards = [];
    }
    if (this.opens.length > 0) {
      this.inflightOpens = this.opens;
      this.opens = [];
    }
    this.writeWindowBytes = this.openWindowBytes;
    this.writeWindowEpoch = this.windowEpoch;
    this.openWindowBytes = 0;
    if (this.replayLog !== null) {
      sealReplay(this);
      this.writeReplayMark = this.replayLog.appended;
    }
  }

  protected override admitted(): void {
    if (this.writeReplayMark > 0) {
      const mark = this.writeReplayMark;
      this.writeReplayMark = 0;
      replayWritten(this, mark);
    }
    const guards = this.inflightGuards;
    const opens = this.inflightOpens;
    this.inflightGuards = NO_SLOTS;
    this.inflightOpens = NO_SLOTS;
    if (guards.length > 0 || opens.length > 0) this.#admitted(guards, opens);
  }

  protected override awaitAdmission(admission: Promise<unknown>, token: number): void {
    const bytes = this.writeWindowBytes;
    if (bytes === 0) {
      super.awaitAdmission(admission, token);
      return;
    }
    const epoch = this.writeWindowEpoch;
    admission.then(
      () => this.unpark(token),
      (error: unknown) => {
        // Refused, so never sent, whatever happened meanwhile: its window bytes come back.
        this.peerEgress.uncharge(bytes, epoch);
        this.refused(token, error);
      },
    );
  }

  #admitted(guards: EgressSlot[], opens: EgressSlot[]): void {
    for (const g of guards) g.owner.onRetired('Sent');
    for (const s of opens) {
      if (s.openAsync) {
        s.openAsync = false;
        if (s.fenced && s.fenceId === OPEN_FENCE && !s.closed) {
          s.fenced = false;
          s.fenceId = 0;
          this.host.metrics.fencedSlots--;
          this.markReady(s);
          if (!this.inWake) this.wake(WakeSource.open);
        }
        continue;
      }
      const resolve = s.openResolve;
      if (resolve !== null) {
        s.openResolve = s.openReject = null;
        resolve(s);
      }
    }
  }

  /** Forget which slots the open batch carries Data for. */
  resetDataSlots(): void {
    this.#dataSlots = 0;
    // A Smi that wraps after 2^30 batches, past 0 (a new slot's): a slot last marked that long ago only
    // miscounts the flush heuristic once.
    this.#batchMark = (this.#batchMark + 1) & 0x3fff_ffff || 1;
  }

  // ───────────────────────── failure and retirement (batcher-retire.ts) ─────────────────────────

  /** The open batch's data slots and window bytes go with it. */
  protected override discardBatch(): void {
    super.discardBatch();
    this.peerEgress.uncharge(this.openWindowBytes, this.windowEpoch);
    this.openWindowBytes = 0;
    this.resetDataSlots();
  }

  /** Epoch death fails every live slot once (docs/protocol.md §3.5, §10.1). */
  protected override epochEnded(error: LanemuxError): void {
    endEpoch(this, error);
  }

  /**
   * Retirement: live slots are told `CloseSlot{PeerGone}` when graceful, failed locally otherwise;
   * waiting opens re-resolve a fresh batcher.
   */
  protected override retiring(error: LanemuxError | undefined, graceful: boolean): boolean {
    return retireSlots(this, error, graceful);
  }
}
