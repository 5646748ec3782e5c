/**
 * The egress batcher of one (peer, lane) (docs/protocol.md §10, §8.1; the flush policies of `FlushPolicy`, config.ts).
 *
 * It owns the slots it opened on that lane, one reusable batch encoder, the flush gate and the
 * coalesced control inbox. Producers stage records synchronously into the open batch when their
 * slot holds credit; otherwise records wait in the slot's withheld FIFO. A write that the
 * transport does not admit at once parks the batcher: nothing is staged until it is admitted, so
 * producers wait on their slots — back-pressure without queues. A refused write is epoch death.
 *
 * This file is the state and the hot path: a record offered, staged or withheld, released when
 * credit returns, the wake, the write and its admission. The other transitions over the same state
 * are module-level functions beside it, one concept each (a plain call, as a private method was;
 * no sub-object between a record and the encoder):
 * - batcher-slots.ts: a slot's open (the OpenSlot batch, the open queue behind a parked write) and close;
 * - batcher-control.ts: the inbox drain at a wake (owned control, peer replies staged as records);
 * - batcher-window.ts: records waiting for the peer window, and its link;
 * - batcher-singleton.ts: a record over the batch cap, staged for rendezvous;
 * - batcher-retire.ts: epoch death and retirement.
 * Hence the state those files act on is plain fields rather than `#private` ones; only the
 * batcher's files write them. What the batcher is given is batcher-host.ts; per-record sizes and
 * appends are egress-record.ts, the flush decision flush-gate.ts, coalesced replies
 * control-inbox.ts, the slot table slot-table.ts.
 */
import type { LanemuxError } from '../errors.ts';
import { WakeSource } from '../metrics/mux-metrics.ts';
import type { Admission, PeerId } from '../messenger/types.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import {
  BATCH_HEADER_LEN,
  CLOSE_RECORD_LEN,
  CloseReason,
  MAX_RECORDS_PER_BATCH,
  RECORD_HEADER_LEN,
  RecordType,
} from '../wire/constants.ts';
import { BatchEncoder } from '../wire/encoder.ts';
import { FRAME_HEARTBEAT, isHeartbeatFrame, itemStringLength } from '../wire/frame.ts';
import { batchCap, type BatcherHost } from './batcher-host.ts';
import { closeSlotLocally, emitClose, OPEN_FENCE, openEgressSlot, writeWaitingOpens } from './batcher-slots.ts';
import { applyInbox } from './batcher-control.ts';
import { failEpoch, retireBatcher, type DrainLeftovers } from './batcher-retire.ts';
import { emitSingleton, stageRoomReturned } from './batcher-singleton.ts';
import { syncWindow, windowBlock, windowRoom } from './batcher-window.ts';
import { UNBOUNDED_EGRESS, type PeerEgress } from './peer-egress.ts';
import { ControlInbox } from './control-inbox.ts';
import { EndedSlots } from './ended-slots.ts';
import { EgressKind, type EgressSlot, Offer } from './egress-slot.ts';
import type { EgressSlotOwner, SlotBatcher } from './egress-slot.ts';
import { MuxError } from './errors.ts';
import { FlushGate, StagedKind } from './flush-gate.ts';
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

const TYPE_COUNT = 6;
/** The lists of a written batch that carried none (shared: never written to). */
const NO_REPLIES: number[] = [];
const NO_SLOTS: EgressSlot[] = [];

/** The egress batcher of one (peer, lane). */
export class Batcher implements SlotBatcher {
  readonly peer: PeerId;
  readonly lane: number;
  readonly inbox = new ControlInbox();
  epoch: bigint;
  batchSeq = 0;
  /** Live owned slots. */
  liveSlots = 0;
  /** Sweep ticks spent idle (for eviction). */
  idleTicks = 0;
  /** Last health check time (ms). */
  lastHealthCheck = 0;
  retired = false;
  /** The effective batch cap in bytes. */
  readonly cap: number;
  /** The connection epoch this batcher's batches are pinned to (undefined: the transport has none). */
  linkEpoch: number | undefined;
  /** True while a write awaits admission. */
  parked = false;

  // The state the batcher's files share (see the header): read anywhere, written only by them.
  readonly host: BatcherHost;
  readonly enc: BatchEncoder;
  readonly gate: FlushGate;
  readonly peerEgress: PeerEgress;
  /** Owned slots by SlotId; freed indexes are reused LIFO at their next generation. */
  readonly slotTable = new SlotTable<EgressSlot>();
  /** Owned slots closed moments ago (shared with the lane's later batchers): late peer control is a straggler. */
  readonly ended: EndedSlots;
  /** A `flushBatch()` or an inbox kick asked for the next wake to write. */
  kicked = false;
  timer: TimerHandle | null = null;
  /** Slots whose withheld FIFO may be releasable. */
  readySlots: EgressSlot[] = [];
  /** Slots opened while parked: their OpenSlot is still to be written (batcher-slots.ts). */
  pendingOpens: EgressSlot[] = [];
  /** Opens waiting for room in the open queue (batcher-slots.ts). */
  openRoom: Array<{ retry: () => void; reject: (e: unknown) => void }> = [];
  // Open batch bookkeeping.
  readonly typeCounts = new Uint32Array(TYPE_COUNT);
  replies: number[] = []; // [peerSlot, credit] pairs staged in the open batch
  /** The open batch's CreditUpdate per peer SlotId: its record offset, to add later grants into. */
  readonly creditAt = new Map<number, number>();
  guards: EgressSlot[] = []; // terminals in the open batch (retirement)
  opens: EgressSlot[] = []; // OpenSlots in the open batch (open acks)
  // In-flight batch (awaiting admission).
  inflightReplies: number[] = [];
  inflightGuards: EgressSlot[] = [];
  /** Credit replies a parked, retiring batcher could not post back to its closed inbox. */
  leftoverCredit: number[] = [];
  /** Identifies the write the batcher is parked on (0: none). */
  parkToken = 0;
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
  readonly onWindowRoom = (): void => windowRoom(this);
  readonly onStageRoom = (): void => stageRoomReturned(this);

  // Only this file's.
  #dataSlotList: EgressSlot[] = [];
  #wakeScheduled = false;
  #wakeSource: number = WakeSource.frame;
  #inWake = false;
  #timerAt = Number.NaN;
  #scheduleWake = (): void => this.#runWake();
  #onTimer = (): void => {
    this.timer = null;
    this.#timerAt = Number.NaN;
    this.#wakeSource = WakeSource.linger;
    this.#runWake();
  };

  constructor(host: BatcherHost, peer: PeerId, lane: number, ended: EndedSlots = new EndedSlots()) {
    this.host = host;
    this.ended = ended;
    this.peer = peer;
    this.lane = lane;
    this.epoch = host.nextEpoch();
    this.linkEpoch = host.sink.linkEpoch?.(peer);
    this.cap = batchCap(host.config.maxBatchBytes, host.sink.maxMessageSize(peer));
    this.enc = new BatchEncoder({ maxBytes: this.cap, initialBytes: Math.min(this.cap, 16_384) });
    this.gate = new FlushGate(host.config.flushPolicy, host.config.replyLinger);
    this.peerEgress = host.peerEgress?.(peer) ?? UNBOUNDED_EGRESS();
    syncWindow(this);
    this.inbox.onNotify = () => this.wake(WakeSource.control);
  }

  /**
   * Whether a record counts against the peer window: every Data body but the heartbeat, while the
   * window limits and is this batcher's link's (a stale link's batches are refused anyway).
   */
  windowed(kind: number, value: unknown): boolean {
    if (!this.peerEgress.counts(this.windowEpoch)) return false;
    return kind !== EgressKind.Body || !isHeartbeatFrame(value as Uint8Array);
  }

  /** Records staged in the open batch. */
  get staged(): number {
    return this.gate.staged;
  }
  /** True when the batcher holds nothing: no live slots, nothing staged or pending. */
  get idle(): boolean {
    return this.liveSlots === 0 && this.gate.staged === 0 && !this.parked && !this.inbox.pending;
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
        if (!this.#inWake) this.wake(WakeSource.frame);
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
    if (this.#emit(slot, EgressKind.Body, FRAME_HEARTBEAT) === EMIT_OK && !this.#inWake) this.wake(WakeSource.frame);
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
    if (windowed) {
      const exact = this.enc.byteLength - before - RECORD_HEADER_LEN;
      this.peerEgress.charge(exact);
      this.openWindowBytes += exact;
    }
    slot.nextSeq = (seq + 1) >>> 0 || 0xffff_ffff;
    this.typeCounts[RecordType.Data]! += 1;
    if (!slot.stagedInBatch) {
      slot.stagedInBatch = true;
      this.#dataSlotList.push(slot);
    }
    // The clock is read only when the gate needs it (first record of a batch, or a terminal).
    const now = this.gate.staged === 0 || terminal ? this.host.runtime.now() : this.gate.since;
    this.gate.onStage(now, terminal ? StagedKind.Urgent : StagedKind.Data);
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

  /** Room in the open batch for `needed` more bytes (`pair`: two records that must share it). */
  fits(needed: number, pair: boolean): boolean {
    // A terminal and its close (or a cancel's close and lifecycle) need two record slots and must share a batch.
    if (this.enc.recordCount + (pair ? 2 : 1) > MAX_RECORDS_PER_BATCH) return false;
    return this.enc.byteLength + needed <= this.cap;
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
      if (!slot.closed) {
        slot.shift();
        m.withheldRecords--;
      }
    }
    if (slot.closed) return;
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
    if (!slot.ready) {
      slot.ready = true;
      this.readySlots.push(slot);
    }
  }

  /** The owned slot for a SlotId at its live generation, if any. */
  slotFor(id: number): EgressSlot | undefined {
    return this.slotTable.get(id);
  }

  /** Every live owned slot. */
  *slots(): IterableIterator<EgressSlot> {
    yield* this.slotTable.values();
  }

  // ───────────────────────── waking and flushing ─────────────────────────

  /** `flushBatch()`: kick and run a wake now (synchronous; never throws). */
  kick(): void {
    this.kicked = true;
    if (!this.parked && !this.#inWake) this.#runWake();
  }

  /** Schedule one wake (a macrotask) unless one is scheduled or running; `source` is what is counted. */
  wake(source: number): void {
    if (this.#wakeScheduled || this.#inWake) return;
    this.#wakeScheduled = true;
    this.#wakeSource = source;
    this.host.runtime.macrotask(this.#scheduleWake);
  }

  /** One wake: drain control, release withheld records, then flush if the gate says so. */
  #runWake(): void {
    this.#wakeScheduled = false;
    if (this.parked || this.retired) return;
    const m = this.host.metrics;
    m.batcherWakes[this.#wakeSource]! += 1;
    this.#wakeSource = WakeSource.frame;
    this.#inWake = true;
    try {
      if (this.pendingOpens.length > 0 || this.openRoom.length > 0) writeWaitingOpens(this);
      if (this.parked) return;
      if (this.inbox.pending) applyInbox(this);
      if (this.retired) return;
      if (this.readySlots.length > 0) {
        const ready = this.readySlots;
        this.readySlots = [];
        for (let i = 0; i < ready.length; i++) {
          const s = ready[i]!;
          s.ready = false;
          if (this.parked) this.markReady(s);
          else this.#release(s);
        }
      }
      if (this.parked) return;
      const now = this.host.runtime.now();
      if (this.gate.shouldFlush(now, this.kicked, this.enc.byteLength, this.liveSlots, this.#dataSlotList.length)) {
        this.flush();
        if (!this.parked) this.kicked = false;
      } else if (this.gate.staged === 0) {
        this.kicked = false;
      }
      if (!this.parked) this.#armTimer();
    } finally {
      this.#inWake = false;
      // A post made during this wake (an owner callback posting to this inbox) found the wake
      // running and was not scheduled: schedule it now, or it would wait for an unrelated post.
      if (this.inbox.pending && !this.parked && !this.retired) this.wake(WakeSource.control);
    }
  }

  /** Open the next batch (epoch, batch_seq, lane). */
  begin(): void {
    this.enc.begin(this.epoch, this.batchSeq, this.lane & 0x0f);
    if (this.creditAt.size > 0) this.creditAt.clear();
  }

  /** Write the open batch (if any records) and await admission; an empty batch gives its seq back. */
  flush(): void {
    const enc = this.enc;
    // Never touch the encoder while its buffer is out for admission.
    if (this.parked || !enc.isOpen) return;
    const count = enc.recordCount;
    if (count === 0) {
      enc.discard();
      this.gate.reset();
      return;
    }
    const payload = enc.finish();
    const m = this.host.metrics;
    const now = this.host.runtime.now();
    const carriedData = this.typeCounts[RecordType.Data]! > 0;
    for (let t = 0; t < TYPE_COUNT; t++) {
      m.recordsSent[t]! += this.typeCounts[t]!;
      this.typeCounts[t] = 0;
    }
    m.batchesSent++;
    m.recordsPerBatchSent.observe(count);
    m.stagedRecords -= this.gate.staged;
    this.gate.onWrite(now, carriedData);
    if (this.timer !== null) {
      // The written batch took its window with it; the wake that follows re-arms for what is left.
      this.host.runtime.clearTimer(this.timer);
      this.timer = null;
      this.#timerAt = Number.NaN;
    }
    this.resetDataSlots();
    this.batchSeq = (this.batchSeq + 1) >>> 0;
    // A batch takes its lists with it only when it has any: three fresh arrays per write were a
    // measurable share of a stream's open (its OpenSlot is a batch of its own). The shared empty
    // lists are never written to (inflight lists are only read, then replaced).
    let replies = NO_REPLIES;
    let guards = NO_SLOTS;
    let opens = NO_SLOTS;
    if (this.replies.length > 0) {
      replies = this.replies;
      this.replies = [];
    }
    if (this.guards.length > 0) {
      guards = this.guards;
      this.guards = [];
    }
    if (this.opens.length > 0) {
      opens = this.opens;
      this.opens = [];
    }
    const windowBytes = this.openWindowBytes;
    const windowEpoch = this.windowEpoch;
    this.openWindowBytes = 0;
    let admission: Admission;
    try {
      admission = this.host.sink.sendBatch(this.peer, this.lane, payload, this.linkEpoch);
    } catch (e) {
      admission = Promise.reject(e);
    }
    if (admission === true) {
      this.#admitted(guards, opens);
      return;
    }
    this.parked = true;
    this.inflightReplies = replies;
    this.inflightGuards = guards;
    // The settlement belongs to this write only: epoch death or retirement in between voids it.
    const token = ++this.parkToken;
    admission.then(
      () => {
        if (this.parkToken !== token || this.retired) return;
        this.parkToken = 0;
        this.parked = false;
        this.inflightReplies = NO_REPLIES;
        this.inflightGuards = NO_SLOTS;
        this.#admitted(guards, opens);
        this.#afterUnpark();
      },
      (error: unknown) => {
        // Refused, so never sent, whatever happened meanwhile: its window bytes come back.
        this.peerEgress.uncharge(windowBytes, windowEpoch);
        if (this.parkToken !== token || this.retired) return;
        this.parkToken = 0;
        this.parked = false;
        this.epochDeath(
          new MuxError('ERR_EPOCH_DEATH', `the transport refused a batch to ${this.peer} lane ${this.lane}`, {
            cause: error,
            retryable: true,
          }),
        );
        // Replies posted while parked, and the credit epoch death re-posted, go out now.
        if (!this.retired) this.#runWake();
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
          if (!this.#inWake) this.wake(WakeSource.open);
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

  #afterUnpark(): void {
    // Everything withheld while parked may move now; the kick (if any) survives.
    for (const s of this.slotTable.values()) if (s.queued > 0) this.markReady(s);
    this.#runWake();
  }

  /** Forget which slots the open batch carries Data for. */
  resetDataSlots(): void {
    const list = this.#dataSlotList;
    for (let i = 0; i < list.length; i++) list[i]!.stagedInBatch = false;
    list.length = 0;
  }

  #armTimer(): void {
    const at = this.gate.deadline();
    if (Number.isNaN(at)) return;
    if (this.timer !== null && this.#timerAt <= at) return;
    if (this.timer !== null) this.host.runtime.clearTimer(this.timer);
    this.#timerAt = at;
    this.timer = this.host.runtime.setTimer(this.#onTimer, Math.max(0, at - this.host.runtime.now()));
  }

  // ───────────────────────── failure and retirement (batcher-retire.ts) ─────────────────────────

  /**
   * Epoch death (docs/protocol.md §3.5, §10.1): fail every live slot once, discard the staged batch (re-posting its credit
   * replies), take a new epoch and restart batch_seq at 0.
   */
  epochDeath(error: LanemuxError): void {
    failEpoch(this, error);
  }

  /**
   * Stop for good. Later posts are refused, so writers re-resolve a fresh batcher. `graceful` (a
   * `retire` posted to the inbox): live slots are told `CloseSlot{PeerGone}` and the inbox's last
   * drain is written; otherwise the staged batch is discarded and the credit replies it held are
   * returned for the caller to re-post to the replacement.
   */
  retire(error?: LanemuxError, graceful = false): DrainLeftovers {
    return retireBatcher(this, error, graceful);
  }
}
