/**
 * The egress batcher of one (peer, lane) (docs/protocol.md §10, §8.1; the flush policies of `FlushPolicy`, config.ts).
 *
 * It owns the slots it opened on that lane, one reusable batch encoder, the flush gate and the
 * coalesced control inbox. Producers stage records synchronously into the open batch when their
 * slot holds credit; otherwise records wait in the slot's withheld FIFO. A write that the
 * transport does not admit at once parks the batcher: nothing is staged until it is admitted, so
 * producers wait on their slots — back-pressure without queues. A refused write is epoch death.
 *
 * One state machine, hence one file: open → staged → written or parked → admitted, with epoch death
 * and retirement, and every transition reads the same state (the open batch, the park flag, the
 * slot table, fences, the ready and window-blocked lists). What is not the machine lives beside it:
 * per-record sizes and appends in egress-record.ts, the flush decision in flush-gate.ts, coalesced
 * replies in control-inbox.ts, the slot table in slot-table.ts.
 */
import { SenderLedger } from '../credit/sender-ledger.ts';
import type { LanemuxError } from '../errors.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import { DropReason, WakeSource } from '../metrics/mux-metrics.ts';
import type { Admission, PeerId } from '../messenger/types.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import {
  BATCH_HEADER_LEN,
  CLOSE_RECORD_LEN,
  COALESCE_THRESHOLD,
  CloseReason,
  LifecycleAction,
  MAX_RECORDS_PER_BATCH,
  MIN_BATCH_CAP,
  RECORD_HEADER_LEN,
  RecordType,
} from '../wire/constants.ts';
import { BatchEncoder } from '../wire/encoder.ts';
import { FRAME_HEARTBEAT, isHeartbeatFrame, itemStringLength } from '../wire/frame.ts';
import { formatSlotId, slotGeneration, slotIndex } from '../wire/slot-id.ts';
import { formatMuxSlot } from './rendezvous.ts';
import { UNBOUNDED_EGRESS, type PeerEgress } from './peer-egress.ts';
import type { ResolvedMuxConfig } from './config.ts';
import { ControlInbox } from './control-inbox.ts';
import { EgressKind, EgressSlot, Offer } from './egress-slot.ts';
import type { EgressSlotOwner, SlotBatcher } from './egress-slot.ts';
import type { InboxDrain } from './control-inbox.ts';
import { MuxError } from './errors.ts';
import { FlushGate, StagedKind } from './flush-gate.ts';
import { SlotTable } from './slot-table.ts';
import { appendRecord, bodyUpperBound, peerCloseError, recordBytes, windowBytes } from './egress-record.ts';

/** The transport as a batcher uses it. */
export interface BatchSink {
  /** Send one batch; with `linkEpoch`, only on that connection of the peer. */
  sendBatch(peer: PeerId, lane: number, payload: Uint8Array, linkEpoch?: number): Admission;
  maxMessageSize(peer: PeerId): number;
  /** The peer's current connection epoch, if the transport has one. */
  linkEpoch?(peer: PeerId): number | undefined;
}

/** What a batcher needs from its mux. */
export interface BatcherHost {
  readonly config: ResolvedMuxConfig;
  readonly metrics: MuxMetrics;
  readonly runtime: Runtime;
  readonly sink: BatchSink;
  /** A fresh epoch from the transport-wide counter (starts at 1). */
  nextEpoch(): bigint;
  /** True while the peer is connected (credit owed to a gone peer is moot, not lost). */
  peerAlive(peer: PeerId): boolean;
  /** Hand credit replies a retiring batcher could not write to its replacement. */
  repostCredit(peer: PeerId, lane: number, credit: readonly number[]): void;
  /** Rendezvous: keep a singleton batch for the peer to pull; its descriptor's admission resolves it. */
  stage(peer: PeerId, lane: number, payload: Uint8Array, muxSlot: string): { id: number; admission: Admission };
  /** True if a singleton of `size` bytes may be staged toward `peer` now. */
  stageRoom(peer: PeerId, size: number): boolean;
  /** Call `cb` once when staged bytes toward `peer` are released. */
  whenStageRoom(peer: PeerId, cb: () => void): void;
  /** Withheld bytes and the window toward `peer`, shared by its lanes (absent: unbounded). */
  peerEgress?(peer: PeerId): PeerEgress;
  /** The receive window `peer` advertised for its current link (absent or `Infinity`: no limit). */
  sendWindow?(peer: PeerId): number;
}

/** Opens that may wait behind a parked write; more opens wait for room (`OPEN_QUEUE_DEPTH`). */
export const OPEN_QUEUE_DEPTH = 64;

/** Per-receiver bound on slot indices: a sender never opens more live slots than a table holds. */
export const MAX_LIVE_SLOTS_PER_BATCHER = 65_536;

const TYPE_COUNT = 6;

/** Batch cap: max(29, min(maxBatchBytes, eager budget, 65,536)) (docs/protocol.md §8.1). */
export function batchCap(maxBatchBytes: number, eagerBudget: number): number {
  const budget = eagerBudget > 0 ? eagerBudget : Number.POSITIVE_INFINITY;
  return Math.max(MIN_BATCH_CAP, Math.min(maxBatchBytes, budget, COALESCE_THRESHOLD));
}

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

  readonly #host: BatcherHost;
  readonly #enc: BatchEncoder;
  readonly #gate: FlushGate;
  readonly #cap: number;
  readonly #peerEgress: PeerEgress;
  #linkEpoch: number | undefined;
  /** Owned slots by SlotId; freed indexes are reused LIFO at their next generation. */
  readonly #slots = new SlotTable<EgressSlot>();
  #parked = false;
  #kicked = false;
  #wakeScheduled = false;
  #wakeSource: number = WakeSource.frame;
  #inWake = false;
  #timer: TimerHandle | null = null;
  #timerAt = Number.NaN;
  /** Slots whose withheld FIFO may be releasable. */
  #ready: EgressSlot[] = [];
  /** Slots opened while parked: their OpenSlot is still to be written. */
  #pendingOpens: EgressSlot[] = [];
  /** Opens waiting for room in the open queue. */
  #openRoom: Array<{ retry: () => void; reject: (e: unknown) => void }> = [];
  // Open batch bookkeeping.
  #typeCounts = new Uint32Array(TYPE_COUNT);
  #replies: number[] = []; // [peerSlot, credit] pairs staged in the open batch
  /** The open batch's CreditUpdate per peer SlotId: its record offset, to add later grants into. */
  #creditAt = new Map<number, number>();
  #guards: EgressSlot[] = []; // terminals in the open batch (retirement)
  #opens: EgressSlot[] = []; // OpenSlots in the open batch (open acks)
  #dataSlotList: EgressSlot[] = [];
  // In-flight batch (awaiting admission).
  #inflightReplies: number[] = [];
  #inflightGuards: EgressSlot[] = [];
  #leftoverCredit: number[] = [];
  /** Identifies the write the batcher is parked on (0: none). */
  #parkToken = 0;
  /** Slots whose singleton waits for staging room toward this peer. */
  #stageBlocked: EgressSlot[] = [];
  /** The link epoch the peer window counts this batcher's records on (0: the transport has none). */
  #windowEpoch = 0;
  /** Window bytes charged by the open batch (given back if it is discarded; a written batch's go with its admission). */
  #openWindowBytes = 0;
  /** Slots whose head record waits for the peer's window, in the order they blocked (a FIFO with a head). */
  #windowBlocked: EgressSlot[] = [];
  #windowHead = 0;
  /** Registered with the peer egress for the next release. */
  #windowWaiting = false;
  #onWindowRoom = (): void => this.#windowRoom();
  #onStageRoom = (): void => {
    const blocked = this.#stageBlocked;
    this.#stageBlocked = [];
    for (const s of blocked) if (!s.closed) this.#markReady(s);
    if (!this.retired) this.#wake(WakeSource.control);
  };
  #scheduleWake = (): void => this.#runWake();
  #onTimer = (): void => {
    this.#timer = null;
    this.#timerAt = Number.NaN;
    this.#wakeSource = WakeSource.linger;
    this.#runWake();
  };

  constructor(host: BatcherHost, peer: PeerId, lane: number) {
    this.#host = host;
    this.peer = peer;
    this.lane = lane;
    this.epoch = host.nextEpoch();
    this.#linkEpoch = host.sink.linkEpoch?.(peer);
    this.#cap = batchCap(host.config.maxBatchBytes, host.sink.maxMessageSize(peer));
    this.#enc = new BatchEncoder({ maxBytes: this.#cap, initialBytes: Math.min(this.#cap, 16_384) });
    this.#gate = new FlushGate(host.config.flushPolicy, host.config.replyLinger);
    this.#peerEgress = host.peerEgress?.(peer) ?? UNBOUNDED_EGRESS();
    this.#syncWindow();
    this.inbox.onNotify = () => this.#wake(WakeSource.control);
  }

  /** Put the peer window on this batcher's link (a newer link resets it; an older one leaves this batcher uncounted). */
  #syncWindow(): void {
    this.#windowEpoch = this.#linkEpoch ?? 0;
    this.#peerEgress.sync(this.#windowEpoch, this.#host.sendWindow?.(this.peer) ?? Number.POSITIVE_INFINITY);
  }

  /**
   * Whether a record counts against the peer window: every Data body but the heartbeat, while the
   * window limits and is this batcher's link's (a stale link's batches are refused anyway).
   */
  #windowed(kind: number, value: unknown): boolean {
    if (!this.#peerEgress.counts(this.#windowEpoch)) return false;
    return kind !== EgressKind.Body || !isHeartbeatFrame(value as Uint8Array);
  }

  /** `slot`'s head record does not fit the peer window: it waits in the queue (EMIT_WINDOW). */
  #windowBlock(slot: EgressSlot): number {
    if (!slot.windowBlocked) {
      slot.windowBlocked = true;
      this.#windowBlocked.push(slot);
      this.#host.metrics.sendWindowBlocked++;
    }
    if (!this.#windowWaiting) {
      this.#windowWaiting = true;
      this.#peerEgress.whenRoom(this.#onWindowRoom);
    }
    return EMIT_WINDOW;
  }

  /**
   * The peer released window: wake the blocked slots, oldest first, as long as their head records
   * would fit (so a small release wakes a few slots, not all of them); the rest keep waiting.
   */
  #windowRoom(): void {
    this.#windowWaiting = false;
    if (this.retired) return;
    const pe = this.#peerEgress;
    const list = this.#windowBlocked;
    const size = pe.sendWindow.size;
    let inflight = pe.sendWindow.inflight;
    let i = this.#windowHead;
    let woke = false;
    for (; i < list.length; i++) {
      const s = list[i]!;
      if (!s.windowBlocked || s.closed || s.queued === 0) {
        s.windowBlocked = false;
        continue;
      }
      const b = windowBytes(s.qKind[s.qHead]!, s.qValue[s.qHead], this.#cap);
      if (inflight !== 0 && inflight + b > size) break;
      inflight += b;
      s.windowBlocked = false;
      this.#markReady(s);
      woke = true;
    }
    if (i === list.length) {
      list.length = 0;
      i = 0;
    } else if (i > 1024 && i * 2 > list.length) {
      list.splice(0, i);
      i = 0;
    }
    this.#windowHead = i;
    if (i < list.length) {
      this.#windowWaiting = true;
      pe.whenRoom(this.#onWindowRoom);
    }
    if (woke) this.#wake(WakeSource.control);
  }

  /** The connection epoch this batcher's batches are pinned to (undefined: the transport has none). */
  get linkEpoch(): number | undefined {
    return this.#linkEpoch;
  }

  /** The effective batch cap in bytes. */
  get cap(): number {
    return this.#cap;
  }
  /** True while a write awaits admission. */
  get parked(): boolean {
    return this.#parked;
  }
  /** Records staged in the open batch. */
  get staged(): number {
    return this.#gate.staged;
  }
  /** True when the batcher holds nothing: no live slots, nothing staged or pending. */
  get idle(): boolean {
    return this.liveSlots === 0 && this.#gate.staged === 0 && !this.#parked && !this.inbox.pending;
  }

  // ───────────────────────── opening ─────────────────────────

  /**
   * Open a slot for (anchor, session) holding `credit` (the advertised window). Resolves once the
   * OpenSlot batch is admitted (the awaited open ack), with the slot ready for records.
   */
  openSlot(
    anchorId: bigint,
    sessionId: bigint,
    credit: number,
    owner: EgressSlotOwner,
    slotByteBudget = this.#host.config.slotByteBudget,
  ): Promise<EgressSlot> {
    if (this.retired)
      return Promise.reject(new MuxError('ERR_CLOSED', 'batcher retired; re-resolve', { retryable: true }));
    if (this.#parked && this.#pendingOpens.length >= OPEN_QUEUE_DEPTH) {
      // The open queue is full while the peer is congested: the attach waits for room.
      return new Promise((resolve, reject) => {
        this.#openRoom.push({
          retry: () => this.openSlot(anchorId, sessionId, credit, owner, slotByteBudget).then(resolve, reject),
          reject,
        });
      });
    }
    if (this.#cap < OPEN_BATCH_BYTES) {
      // A cap this small (29..44 bytes) passes the batch-cap clamp but cannot carry an OpenSlot: refuse
      // before an index is taken and the slot counted live.
      return Promise.reject(
        new MuxError(
          'ERR_RECORD_TOO_LARGE',
          `the ${this.#cap}-byte batch cap toward ${this.peer} cannot carry an OpenSlot (${OPEN_BATCH_BYTES} bytes): raise maxBatchBytes or the transport's message size`,
        ),
      );
    }
    if (this.liveSlots >= MAX_LIVE_SLOTS_PER_BATCHER) {
      return Promise.reject(
        new MuxError(
          'ERR_TOO_MANY_SLOTS',
          `peer ${this.peer} lane ${this.lane} already holds ${this.liveSlots} live slots`,
        ),
      );
    }
    const id = this.#slots.allocate();
    const slot = new EgressSlot(
      this,
      id,
      anchorId,
      sessionId,
      new SenderLedger(credit),
      owner,
      slotByteBudget,
      this.#peerEgress,
    );
    this.#slots.put(slot);
    this.inbox.publish(slotIndex(id), slotGeneration(id), sessionId);
    this.liveSlots++;
    this.#host.metrics.liveSlots++;
    this.#host.metrics.batcherWakes[WakeSource.open]! += 1;
    if (this.#host.config.asyncOpenAck) {
      // Ack at once (`asyncOpenAck`). The slot is fenced only if the OpenSlot is not admitted
      // synchronously: its records wait until the open is on its way.
      slot.openAsync = true;
      if (this.#parked) this.#pendingOpens.push(slot);
      else this.#writeOpens([slot]);
      if (slot.openAsync && !slot.closed) {
        slot.fenced = true;
        slot.fenceId = OPEN_FENCE;
        this.#host.metrics.fencedSlots++;
      }
      return Promise.resolve(slot);
    }
    // The ack's settlers live on the slot (a map entry and a closure per open were measurable).
    const acked = new Promise<EgressSlot>((resolve, reject) => {
      slot.openResolve = resolve;
      slot.openReject = reject;
    });
    if (this.#parked) this.#pendingOpens.push(slot);
    else this.#writeOpens([slot]);
    return acked;
  }

  /** Each OpenSlot goes out in a batch of its own: flush before, stage, flush after. */
  #writeOpens(slots: EgressSlot[]): void {
    this.#flush();
    if (this.#parked) {
      this.#pendingOpens.push(...slots);
      return;
    }
    this.#begin();
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      if (slot.closed) continue;
      if (!this.#fits(RECORD_HEADER_LEN + 16, false)) {
        this.#flush();
        if (this.#parked) {
          this.#pendingOpens.push(...slots.slice(i));
          return;
        }
        this.#begin();
      }
      // Opens queued behind a parked write share batches of their own: no data can overtake them.
      this.#enc.appendOpenSlot(slot.id, 0, slot.anchorId, slot.sessionId);
      this.#typeCounts[RecordType.OpenSlot]! += 1;
      this.#gate.onStage(this.#host.runtime.now(), StagedKind.Urgent);
      this.#host.metrics.stagedRecords++;
      this.#opens.push(slot);
      slot.opening = false;
    }
    this.#flush();
  }

  // ───────────────────────── producer path ─────────────────────────

  /**
   * Offer a record from a producer. Stages it at once when the slot has credit and nothing waits
   * ahead of it; otherwise queues it in the slot's withheld FIFO. Never throws for a closed slot:
   * answers `Offer.Closed`.
   */
  offer(slot: EgressSlot, kind: number, value: unknown): Offer {
    if (slot.closed || slot.closeError !== null) return Offer.Closed;
    if (slot.queued === 0 && !slot.fenced && !slot.opening && !this.#parked && this.#affordable(slot, kind)) {
      const r = this.#emit(slot, kind, value);
      if (r === EMIT_OK) {
        if (!this.#inWake) this.#wake(WakeSource.frame);
        return Offer.Ok;
      }
      if (r === EMIT_TOO_LARGE) return Offer.Closed;
      // EMIT_PARKED (a clamp flush parked us) or EMIT_WINDOW (the peer window is full): queue it.
    }
    return this.#withhold(slot, kind, value);
  }

  #withhold(slot: EgressSlot, kind: number, value: unknown): Offer {
    const m = this.#host.metrics;
    // A producer that does not wait for `send()` while paused hits a hard cap, never unbounded memory.
    if (kind !== EgressKind.Terminal && slot.paused && slot.withheldBytes >= 2 * slot.byteBudget) return Offer.Refused;
    if (!slot.starved && !this.#affordable(slot, kind)) {
      slot.starved = true;
      m.slotCreditExhausted++;
    }
    slot.enqueue(kind, value, recordBytes(kind, value));
    m.withheldRecords++;
    // Pause at the byte cap, at the inlet depth (C+1) while parked on admission, or while the peer's
    // withheld bytes (all its lanes) are at the peer budget.
    if (
      slot.withheldBytes >= slot.byteBudget ||
      (this.#parked && slot.queued > slot.inletDepth) ||
      this.#peerEgress.over
    ) {
      if (!slot.paused) m.producerSendBackpressure++;
      slot.paused = true;
      return Offer.Wait;
    }
    return Offer.Ok;
  }

  /** A heartbeat goes only when it can go now; a slot without credit or with a backlog drops it. */
  heartbeat(slot: EgressSlot): void {
    if (slot.closed || slot.closeError !== null || slot.queued > 0 || slot.fenced || slot.opening || this.#parked)
      return;
    if (slot.ledger.dataAvailable === 0) return;
    if (this.#emit(slot, EgressKind.Body, FRAME_HEARTBEAT) === EMIT_OK && !this.#inWake) this.#wake(WakeSource.frame);
  }

  /** The producer left without a terminal: a CloseSlot{PeerGone} follows whatever is withheld. */
  depart(slot: EgressSlot): void {
    if (slot.closed || slot.closeOwed) return;
    slot.closeOwed = true;
    if (slot.queued > 0 || slot.fenced || slot.opening || this.#parked) {
      this.#markReady(slot);
      this.#wake(WakeSource.inlet_closed);
      return;
    }
    this.#emitClose(slot, CloseReason.PeerGone, null);
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
    if (BATCH_HEADER_LEN + needed > this.#cap) {
      const exact = kind === EgressKind.ItemString ? itemStringLength(value as string) : body;
      const total = BATCH_HEADER_LEN + RECORD_HEADER_LEN + exact + (terminal ? CLOSE_RECORD_LEN : 0);
      if (total > this.#cap) return this.#emitSingleton(slot, kind, value, terminal, total);
    }
    // The peer window: the bound is checked, the exact body is charged once encoded.
    const windowed = this.#windowed(kind, value);
    if (windowed && !this.#peerEgress.sendWindow.fits(body)) return this.#windowBlock(slot);
    if (!this.#enc.isOpen) this.#begin();
    if (!this.#fits(needed, terminal)) {
      this.#flush();
      if (this.#parked) return EMIT_PARKED;
      this.#begin();
    }
    const seq = slot.nextSeq;
    if (terminal) slot.ledger.spendTerminal();
    else if (slot.ledger.spendData() !== 'ok') return EMIT_PARKED; // guarded by #affordable
    const before = this.#enc.byteLength;
    appendRecord(this.#enc, slot.id, seq, kind, value);
    if (windowed) {
      const exact = this.#enc.byteLength - before - RECORD_HEADER_LEN;
      this.#peerEgress.charge(exact);
      this.#openWindowBytes += exact;
    }
    slot.nextSeq = (seq + 1) >>> 0 || 0xffff_ffff;
    this.#typeCounts[RecordType.Data]! += 1;
    if (!slot.stagedInBatch) {
      slot.stagedInBatch = true;
      this.#dataSlotList.push(slot);
    }
    // The clock is read only when the gate needs it (first record of a batch, or a terminal).
    const now = this.#gate.staged === 0 || terminal ? this.#host.runtime.now() : this.#gate.since;
    this.#gate.onStage(now, terminal ? StagedKind.Urgent : StagedKind.Data);
    this.#host.metrics.stagedRecords++;
    if (terminal) {
      this.#enc.appendCloseSlot(slot.id, slot.nextSeq, CloseReason.TerminalSent);
      slot.nextSeq = (slot.nextSeq + 1) >>> 0;
      this.#typeCounts[RecordType.CloseSlot]! += 1;
      this.#gate.onStage(now, StagedKind.Urgent);
      this.#host.metrics.stagedRecords++;
      slot.terminalStaged = true;
      this.#guards.push(slot);
      this.#closeSlotLocally(slot, null, true);
    }
    return EMIT_OK;
  }

  /**
   * A record over the batch cap goes alone, as a rendezvous transfer (docs/protocol.md §8.1): flush what is
   * staged, encode the singleton batch (it takes a batch_seq), stage it for the peer to pull and
   * fence the slot until the descriptor is admitted. A terminal goes with its CloseSlot and closes
   * the slot. Over `stagedPayloadMax` the stream fails with ERR_RECORD_TOO_LARGE.
   */
  #emitSingleton(slot: EgressSlot, kind: number, value: unknown, terminal: boolean, total: number): number {
    const host = this.#host;
    const m = host.metrics;
    if (total > host.config.stagedPayloadMax) {
      const error = new MuxError(
        'ERR_RECORD_TOO_LARGE',
        `a ${total}-byte record exceeds stagedPayloadMax (${host.config.stagedPayloadMax} bytes) toward ${this.peer}`,
      );
      m.withheldRecords -= slot.clearQueue();
      slot.closeOwed = true;
      this.#emitClose(slot, CloseReason.PeerGone, error);
      return EMIT_TOO_LARGE;
    }
    if (!host.stageRoom(this.peer, total)) {
      // Staged bytes toward this peer are at their bound: the record waits in the slot's queue.
      if (this.#stageBlocked.length === 0) host.whenStageRoom(this.peer, this.#onStageRoom);
      if (!this.#stageBlocked.includes(slot)) this.#stageBlocked.push(slot);
      return EMIT_PARKED;
    }
    // A singleton counts against the peer window by its whole batch (what the receiver charges or
    // releases for it); rendezvous keeps its own budget for the staged bytes themselves.
    const windowed = this.#windowed(kind, value);
    if (windowed && !this.#peerEgress.sendWindow.fits(total)) return this.#windowBlock(slot);
    this.#flush();
    if (this.#parked) return EMIT_PARKED;
    if (terminal) slot.ledger.spendTerminal();
    else if (slot.ledger.spendData() !== 'ok') return EMIT_PARKED;
    const enc = new BatchEncoder({ maxBytes: total, initialBytes: total });
    enc.begin(this.epoch, this.batchSeq, this.lane & 0x0f);
    const seq = slot.nextSeq;
    appendRecord(enc, slot.id, seq, kind, value);
    slot.nextSeq = (seq + 1) >>> 0 || 0xffff_ffff;
    if (terminal) {
      enc.appendCloseSlot(slot.id, slot.nextSeq, CloseReason.TerminalSent);
      slot.nextSeq = (slot.nextSeq + 1) >>> 0;
    }
    const payload = enc.finish();
    this.batchSeq = (this.batchSeq + 1) >>> 0;
    const charged = windowed ? payload.byteLength : 0;
    const windowEpoch = this.#windowEpoch;
    if (windowed) this.#peerEgress.charge(charged);
    m.recordsSent[RecordType.Data]! += 1;
    if (terminal) m.recordsSent[RecordType.CloseSlot]! += 1;
    m.batchesSent++;
    m.recordsPerBatchSent.observe(terminal ? 2 : 1);
    m.rendezvousSingletons++;
    const { id, admission } = host.stage(
      this.peer,
      this.lane,
      payload,
      formatMuxSlot(this.epoch, slot.id, slot.sessionId),
    );
    if (terminal) {
      slot.terminalStaged = true;
      this.#closeSlotLocally(slot, null, true);
      // The terminal's guard reports when the descriptor is admitted.
      if (admission === true) slot.owner.onRetired('Sent');
      else
        admission.then(
          () => slot.owner.onRetired('Sent'),
          (e: unknown) => this.#singletonFailed(slot, e, true, charged, windowEpoch),
        );
      return EMIT_OK;
    }
    // A rendezvous record always fences its slot, even when admitted synchronously: the receiver
    // resolves it outside the ordered lane.
    slot.fenced = true;
    slot.fenceId = id;
    m.fencedSlots++;
    const epoch = this.epoch;
    const resolved = (): void => {
      if (slot.fenceId !== id || slot.closed || this.epoch !== epoch) return;
      this.inbox.postResolution(slot.id, true, '', id);
    };
    if (admission === true) resolved();
    else admission.then(resolved, (e: unknown) => this.#singletonFailed(slot, e, false, charged, windowEpoch));
    return EMIT_OK;
  }

  /** A staged singleton was refused by the transport: epoch death for the live generation (docs/protocol.md §8.1). */
  #singletonFailed(
    slot: EgressSlot,
    error: unknown,
    terminal: boolean,
    windowBytes: number,
    windowEpoch: number,
  ): void {
    // Its descriptor never left: the receiver will not release what was charged for it.
    this.#peerEgress.uncharge(windowBytes, windowEpoch);
    if (terminal) slot.owner.onRetired('Discarded');
    const why = error instanceof Error ? error.message : String(error);
    if (!terminal && !slot.closed && this.slotFor(slot.id) === slot) {
      this.inbox.postResolution(slot.id, false, why);
      return;
    }
    this.#host.metrics.recordsDropped[DropReason.stale_singleton]! += 1;
  }

  #fits(needed: number, pair: boolean): boolean {
    // A terminal and its close (or a cancel's close and lifecycle) need two record slots and must share a batch.
    if (this.#enc.recordCount + (pair ? 2 : 1) > MAX_RECORDS_PER_BATCH) return false;
    return this.#enc.byteLength + needed <= this.#cap;
  }

  #emitClose(slot: EgressSlot, reason: CloseReason, error: LanemuxError | null): void {
    if (error !== null && slot.closeError === null) slot.closeError = error;
    if (!this.#enc.isOpen) this.#begin();
    if (!this.#fits(CLOSE_RECORD_LEN, false)) {
      this.#flush();
      if (this.#parked) {
        this.#markReady(slot);
        return;
      }
      this.#begin();
    }
    this.#enc.appendCloseSlot(slot.id, slot.nextSeq, reason);
    slot.nextSeq = (slot.nextSeq + 1) >>> 0;
    this.#typeCounts[RecordType.CloseSlot]! += 1;
    this.#gate.onStage(this.#host.runtime.now(), StagedKind.Urgent);
    this.#host.metrics.stagedRecords++;
    this.#closeSlotLocally(
      slot,
      slot.closeError ?? new MuxError('ERR_SLOT_CLOSED', `${formatSlotId(slot.id)} closed: the producer left`),
      false,
    );
    this.#wake(WakeSource.inlet_closed);
  }

  /** Release a slot's withheld records while credit, the fence and the batch allow. */
  #release(slot: EgressSlot): void {
    const m = this.#host.metrics;
    while (slot.queued > 0 && !slot.closed && !slot.fenced && !this.#parked) {
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
      if (slot.closeOwed && !slot.fenced && !this.#parked) {
        this.#emitClose(slot, CloseReason.PeerGone, null);
        return;
      }
    }
    if (
      slot.paused &&
      slot.withheldBytes < slot.byteBudget &&
      !(this.#parked && slot.queued > slot.inletDepth) &&
      (slot.queued === 0 || !this.#peerEgress.over)
    ) {
      slot.resume();
    }
  }

  #markReady(slot: EgressSlot): void {
    if (!slot.ready) {
      slot.ready = true;
      this.#ready.push(slot);
    }
  }

  // ───────────────────────── closing ─────────────────────────

  /**
   * Close a slot on this side: free the index (LIFO), bump its generation, drop its withheld
   * records and fail its producer (unless a terminal went out).
   */
  #closeSlotLocally(slot: EgressSlot, error: LanemuxError | null, terminalSent: boolean): void {
    if (slot.closed) return;
    slot.closed = true;
    // After a terminal (nearly every stream's end) one shared error marks the slot closed: building
    // an Error per stream (its stack trace) cost ~9 µs, a fifth of a stream's whole open/close.
    slot.closeError = error ?? STREAM_ENDED;
    if (slot.fenced) {
      slot.fenced = false;
      slot.fenceId = 0;
      this.#host.metrics.fencedSlots--;
    }
    const m = this.#host.metrics;
    m.withheldRecords -= slot.clearQueue();
    this.#slots.release(slot);
    this.liveSlots--;
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

  /** The owned slot for a SlotId at its live generation, if any. */
  slotFor(id: number): EgressSlot | undefined {
    return this.#slots.get(id);
  }

  /** Every live owned slot. */
  *slots(): IterableIterator<EgressSlot> {
    yield* this.#slots.values();
  }

  // ───────────────────────── waking and flushing ─────────────────────────

  /** `flushBatch()`: kick and run a wake now (synchronous; never throws). */
  kick(): void {
    this.#kicked = true;
    if (!this.#parked && !this.#inWake) this.#runWake();
  }

  #wake(source: number): void {
    if (this.#wakeScheduled || this.#inWake) return;
    this.#wakeScheduled = true;
    this.#wakeSource = source;
    this.#host.runtime.macrotask(this.#scheduleWake);
  }

  /** One wake: drain control, release withheld records, then flush if the gate says so. */
  #runWake(): void {
    this.#wakeScheduled = false;
    if (this.#parked || this.retired) return;
    const m = this.#host.metrics;
    m.batcherWakes[this.#wakeSource]! += 1;
    this.#wakeSource = WakeSource.frame;
    this.#inWake = true;
    try {
      if (this.#pendingOpens.length > 0) {
        const opens = this.#pendingOpens;
        this.#pendingOpens = [];
        this.#writeOpens(opens);
      }
      // Room in the open queue: let waiting opens in (they write now or queue again).
      while (this.#openRoom.length > 0 && !(this.#parked && this.#pendingOpens.length >= OPEN_QUEUE_DEPTH))
        this.#openRoom.shift()!.retry();
      if (this.#parked) return;
      if (this.inbox.pending) this.#applyInbox();
      if (this.retired) return;
      if (this.#ready.length > 0) {
        const ready = this.#ready;
        this.#ready = [];
        for (let i = 0; i < ready.length; i++) {
          const s = ready[i]!;
          s.ready = false;
          if (this.#parked) this.#markReady(s);
          else this.#release(s);
        }
      }
      if (this.#parked) return;
      const now = this.#host.runtime.now();
      if (this.#gate.shouldFlush(now, this.#kicked, this.#enc.byteLength, this.liveSlots, this.#dataSlotList.length)) {
        this.#flush();
        if (!this.#parked) this.#kicked = false;
      } else if (this.#gate.staged === 0) {
        this.#kicked = false;
      }
      if (!this.#parked) this.#armTimer();
    } finally {
      this.#inWake = false;
      // A post made during this wake (an owner callback posting to this inbox) found the wake
      // running and was not scheduled: schedule it now, or it would wait for an unrelated post.
      if (this.inbox.pending && !this.#parked && !this.retired) this.#wake(WakeSource.control);
    }
  }

  #applyInbox(): void {
    const d = this.inbox.drain();
    if (d.kicked) this.#kicked = true;
    this.#stageReplies(d);
    // Lifecycle first: a consumer's cancel travels with the CloseSlot that retires its slot, and the
    // producer should learn it was cancelled, not just that the slot is unknown.
    for (const l of d.ownedLifecycle.values()) {
      const slot = this.slotFor(l.slot);
      if (slot && slot.sessionId === l.session) {
        if (l.cancel) slot.cancelled = true;
        slot.owner.onLifecycle(l.cancel);
      }
    }
    // Owned control: closes dominate; grants release withheld records.
    for (const [id, e] of d.owned) {
      const slot = this.slotFor(id);
      if (!slot) continue;
      if (e.close >= 0) {
        this.#closeSlotLocally(slot, peerCloseError(slot, e.close), false);
        continue;
      }
      if (e.resolution === 2) {
        this.epochDeath(
          new MuxError('ERR_EPOCH_DEATH', `singleton for ${formatSlotId(id)} failed: ${e.resolutionError}`),
        );
        return;
      }
      if (e.resolution === 1 && slot.fenced && (e.resolutionId === 0 || e.resolutionId === slot.fenceId)) {
        slot.fenced = false;
        slot.fenceId = 0;
        this.#host.metrics.fencedSlots--;
      }
      if (e.credit > 0) slot.ledger.grant(e.credit);
      this.#markReady(slot);
    }
    if (d.retire) {
      const left = this.retire(undefined, true);
      if (left.credit.length > 0) this.#host.repostCredit(this.peer, this.lane, left.credit);
    }
  }

  /**
   * Peer replies: CreditUpdate first, then CloseSlot/RejectSlot, then lifecycle. A cancel's
   * CloseSlot{UnknownSlot} and LifecycleSlot{cancel} go as a pair in one batch (docs/protocol.md §10.3): the producer
   * then applies both in one drain, lifecycle first, even when the replies fill several batches.
   */
  #stageReplies(d: InboxDrain): void {
    const now = this.#host.runtime.now();
    for (const [peerSlot, e] of d.replies)
      if (e.credit > 0) this.#stageControl(now, RecordType.CreditUpdate, peerSlot, e.credit, 0n);
    const lifecycles = d.lifecycleReplies;
    if (lifecycles.size > 0 && d.replies.size > 0) {
      for (const [key, l] of lifecycles) {
        const r = l.cancel ? d.replies.get(l.slot) : undefined;
        if (r === undefined || r.close < 0) continue;
        this.#stageControl(now, RecordType.CloseSlot, l.slot, r.close, 0n, LIFECYCLE_RECORD_LEN);
        this.#stageControl(now, RecordType.LifecycleSlot, l.slot, LifecycleAction.Cancel, l.session);
        r.close = -1;
        lifecycles.delete(key);
      }
    }
    for (const [peerSlot, e] of d.replies)
      if (e.close >= 0) this.#stageControl(now, RecordType.CloseSlot, peerSlot, e.close, 0n);
    for (const [peerSlot, reason] of d.rejects) this.#stageControl(now, RecordType.CloseSlot, peerSlot, reason, 0n);
    for (const l of lifecycles.values()) {
      this.#stageControl(
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
  #stageControl(now: number, type: number, peerSlot: number, value: number, session: bigint, pairBytes = 0): void {
    if (type === RecordType.CreditUpdate && !this.#parked && this.#enc.isOpen) {
      const at = this.#creditAt.get(peerSlot);
      if (at !== undefined && this.#enc.addToCreditUpdate(at, value)) {
        this.#replies.push(peerSlot, value);
        return;
      }
    }
    const body = type === RecordType.CreditUpdate ? 4 : type === RecordType.CloseSlot ? 1 : 9;
    if (!this.#parked && !this.#enc.isOpen) this.#begin();
    if (this.#parked || !this.#fits(RECORD_HEADER_LEN + body + pairBytes, pairBytes > 0)) {
      this.#flush();
      if (this.#parked) {
        // Taken from the inbox but not stageable until admission: post it back (coalesced, never
        // lost); a retiring batcher's closed inbox hands credit to its replacement instead.
        if (type === RecordType.CreditUpdate) {
          if (!this.inbox.postReplyCredit(peerSlot, value)) this.#leftoverCredit.push(peerSlot, value);
        } else if (type === RecordType.CloseSlot) this.inbox.postReplyClose(peerSlot, value);
        else this.inbox.postReplyLifecycle(peerSlot, session, value === LifecycleAction.Cancel);
        return;
      }
      this.#begin();
    }
    if (type === RecordType.CreditUpdate) {
      this.#creditAt.set(peerSlot, this.#enc.byteLength);
      this.#enc.appendCreditUpdate(peerSlot, 0, value);
      this.#replies.push(peerSlot, value);
    } else if (type === RecordType.CloseSlot) {
      this.#enc.appendCloseSlot(peerSlot, 0, value as CloseReason);
    } else {
      this.#enc.appendLifecycleSlot(peerSlot, 0, session, value as LifecycleAction);
    }
    this.#typeCounts[type]! += 1;
    this.#gate.onStage(now, type === RecordType.CreditUpdate ? StagedKind.CreditReply : StagedKind.Urgent);
    this.#host.metrics.stagedRecords++;
  }

  #begin(): void {
    this.#enc.begin(this.epoch, this.batchSeq, this.lane & 0x0f);
    if (this.#creditAt.size > 0) this.#creditAt.clear();
  }

  /** Write the open batch (if any records) and await admission; an empty batch gives its seq back. */
  #flush(): void {
    const enc = this.#enc;
    // Never touch the encoder while its buffer is out for admission.
    if (this.#parked || !enc.isOpen) return;
    const count = enc.recordCount;
    if (count === 0) {
      enc.discard();
      this.#gate.reset();
      return;
    }
    const payload = enc.finish();
    const m = this.#host.metrics;
    const now = this.#host.runtime.now();
    const carriedData = this.#typeCounts[RecordType.Data]! > 0;
    for (let t = 0; t < TYPE_COUNT; t++) {
      m.recordsSent[t]! += this.#typeCounts[t]!;
      this.#typeCounts[t] = 0;
    }
    m.batchesSent++;
    m.recordsPerBatchSent.observe(count);
    m.stagedRecords -= this.#gate.staged;
    this.#gate.onWrite(now, carriedData);
    if (this.#timer !== null) {
      // The written batch took its window with it; the wake that follows re-arms for what is left.
      this.#host.runtime.clearTimer(this.#timer);
      this.#timer = null;
      this.#timerAt = Number.NaN;
    }
    this.#resetDataSlots();
    this.batchSeq = (this.batchSeq + 1) >>> 0;
    const replies = this.#replies;
    const guards = this.#guards;
    const opens = this.#opens;
    this.#replies = [];
    this.#guards = [];
    this.#opens = [];
    const windowBytes = this.#openWindowBytes;
    const windowEpoch = this.#windowEpoch;
    this.#openWindowBytes = 0;
    let admission: Admission;
    try {
      admission = this.#host.sink.sendBatch(this.peer, this.lane, payload, this.#linkEpoch);
    } catch (e) {
      admission = Promise.reject(e);
    }
    if (admission === true) {
      this.#admitted(guards, opens);
      return;
    }
    this.#parked = true;
    this.#inflightReplies = replies;
    this.#inflightGuards = guards;
    // The settlement belongs to this write only: epoch death or retirement in between voids it.
    const token = ++this.#parkToken;
    admission.then(
      () => {
        if (this.#parkToken !== token || this.retired) return;
        this.#parkToken = 0;
        this.#parked = false;
        this.#inflightReplies = [];
        this.#inflightGuards = [];
        this.#admitted(guards, opens);
        this.#afterUnpark();
      },
      (error: unknown) => {
        // Refused, so never sent, whatever happened meanwhile: its window bytes come back.
        this.#peerEgress.uncharge(windowBytes, windowEpoch);
        if (this.#parkToken !== token || this.retired) return;
        this.#parkToken = 0;
        this.#parked = false;
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

  /** Drop the open batch unsent: its records' window bytes come back. */
  #discardOpenBatch(): void {
    this.#enc.discard();
    this.#peerEgress.uncharge(this.#openWindowBytes, this.#windowEpoch);
    this.#openWindowBytes = 0;
  }

  #admitted(guards: EgressSlot[], opens: EgressSlot[]): void {
    for (const g of guards) g.owner.onRetired('Sent');
    for (const s of opens) {
      if (s.openAsync) {
        s.openAsync = false;
        if (s.fenced && s.fenceId === OPEN_FENCE && !s.closed) {
          s.fenced = false;
          s.fenceId = 0;
          this.#host.metrics.fencedSlots--;
          this.#markReady(s);
          if (!this.#inWake) this.#wake(WakeSource.open);
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
    for (const s of this.#slots.values()) if (s.queued > 0) this.#markReady(s);
    this.#runWake();
  }

  #resetDataSlots(): void {
    const list = this.#dataSlotList;
    for (let i = 0; i < list.length; i++) list[i]!.stagedInBatch = false;
    list.length = 0;
  }

  #armTimer(): void {
    const at = this.#gate.deadline();
    if (Number.isNaN(at)) return;
    if (this.#timer !== null && this.#timerAt <= at) return;
    if (this.#timer !== null) this.#host.runtime.clearTimer(this.#timer);
    this.#timerAt = at;
    this.#timer = this.#host.runtime.setTimer(this.#onTimer, Math.max(0, at - this.#host.runtime.now()));
  }

  // ───────────────────────── failure and retirement ─────────────────────────

  /**
   * Epoch death (docs/protocol.md §3.5, §10.1): fail every live slot once, discard the staged batch (re-posting its credit
   * replies), take a new epoch and restart batch_seq at 0.
   */
  epochDeath(error: LanemuxError): void {
    const m = this.#host.metrics;
    m.epochDeaths++;
    const lostReplies = [...this.#inflightReplies, ...this.#replies];
    const guards = [...this.#inflightGuards, ...this.#guards];
    this.#discardOpenBatch();
    m.stagedRecords -= this.#gate.staged;
    this.#gate.reset();
    this.#typeCounts.fill(0);
    this.#resetDataSlots();
    this.#replies = [];
    this.#guards = [];
    this.#opens = [];
    this.#inflightReplies = [];
    this.#inflightGuards = [];
    this.#parked = false;
    this.#parkToken = 0;
    const pendingOpens = this.#pendingOpens;
    this.#pendingOpens = [];
    this.#ready = [];
    // The new epoch is in place before any owner callback runs: a callback that re-opens a slot
    // at once must find a consistent batcher.
    this.epoch = this.#host.nextEpoch();
    this.batchSeq = 0;
    this.#linkEpoch = this.#host.sink.linkEpoch?.(this.peer);
    this.#syncWindow();
    this.#windowBlocked = [];
    this.#windowHead = 0;
    const live: EgressSlot[] = [];
    for (const s of this.#slots.values()) live.push(s);
    for (const g of guards) g.owner.onRetired('Discarded');
    for (const s of live) this.#closeSlotLocally(s, error, false);
    for (const s of pendingOpens) this.#closeSlotLocally(s, error, false);
    if (this.#openRoom.length > 0) this.#wake(WakeSource.open); // waiting opens proceed in the new epoch
    if (!this.#host.peerAlive(this.peer)) return;
    for (let i = 0; i < lostReplies.length; i += 2) {
      if (this.inbox.postReplyCredit(lostReplies[i]!, lostReplies[i + 1]!)) m.creditReposted += lostReplies[i + 1]!;
      else m.creditLost += lostReplies[i + 1]!;
    }
  }

  /**
   * Stop for good. Later posts are refused, so writers re-resolve a fresh batcher.
   *
   * - `graceful` (a `retire` posted to the inbox, applied at a wake): each live slot gets a
   *   `CloseSlot{PeerGone}` so its consumer learns at once, and the inbox's last drain is written
   *   in a final flush, so a close or credit posted during retirement is never lost.
   * - otherwise (eviction, cancel, teardown): live slots fail locally, the staged batch is
   *   discarded (its records are not counted as sent), and the credit replies it held or that
   *   were still in the inbox are returned for the caller to re-post to the replacement.
   */
  retire(error?: LanemuxError, graceful = false): DrainLeftovers {
    if (this.retired) return { credit: [] };
    this.retired = true;
    if (this.#timer !== null) {
      this.#host.runtime.clearTimer(this.#timer);
      this.#timer = null;
    }
    const err =
      error ?? new MuxError('ERR_CLOSED', `batcher for ${this.peer} lane ${this.lane} retired`, { retryable: true });
    const m = this.#host.metrics;
    // Waiting opens re-resolve a fresh batcher (the mux retries ERR_CLOSED).
    const room = this.#openRoom;
    this.#openRoom = [];
    for (const w of room) w.reject(new MuxError('ERR_CLOSED', 'batcher retired; re-resolve', { retryable: true }));
    for (const s of this.#pendingOpens) this.#closeSlotLocally(s, err, false);
    this.#pendingOpens = [];
    this.#ready = [];
    const credit = this.#leftoverCredit;
    this.#leftoverCredit = [];
    if (graceful && !this.#parked) {
      for (const s of this.#slots.values()) {
        m.withheldRecords -= s.clearQueue();
        if (!this.#parked) this.#emitClose(s, CloseReason.PeerGone, err);
        // A clamp flush that parked leaves the close unwritten: fail the producer all the same.
        if (!s.closed) this.#closeSlotLocally(s, err, false);
      }
      const d = this.inbox.close();
      if (!this.#parked) {
        this.#stageReplies(d);
        this.#flush();
      } else for (const [slot, e] of d.replies) if (e.credit > 0) credit.push(slot, e.credit);
      credit.push(...this.#leftoverCredit);
      this.#leftoverCredit = [];
      return { credit };
    }
    for (const g of this.#guards) g.owner.onRetired('Discarded');
    for (const g of this.#inflightGuards) g.owner.onRetired('Discarded');
    this.#guards = [];
    this.#inflightGuards = [];
    for (const s of this.#slots.values()) this.#closeSlotLocally(s, err, false);
    const d = this.inbox.close();
    m.stagedRecords -= this.#gate.staged;
    this.#gate.reset();
    this.#discardOpenBatch();
    this.#typeCounts.fill(0);
    this.#resetDataSlots();
    this.#windowBlocked = [];
    this.#windowHead = 0;
    credit.push(...this.#replies);
    this.#replies = [];
    for (const [slot, e] of d.replies) if (e.credit > 0) credit.push(slot, e.credit);
    return { credit };
  }
}

/** Credit replies a retired batcher still held, to hand to its replacement. */
export interface DrainLeftovers {
  credit: number[];
}

/** A LifecycleSlot record: header + session id + action. */
const LIFECYCLE_RECORD_LEN = RECORD_HEADER_LEN + 9;

/** A batch holding one OpenSlot: header + record header + anchor id + session id. */
const OPEN_BATCH_BYTES = BATCH_HEADER_LEN + RECORD_HEADER_LEN + 16;

/** The close marker of a slot that sent its terminal (shared: it carries no per-stream detail). */
const STREAM_ENDED = new MuxError('ERR_STREAM_ENDED', 'the stream already sent its terminal');

/** `fenceId` of a slot fenced behind its own OpenSlot (asyncOpenAck); transfer ids start at 1. */
const OPEN_FENCE = -1;

const EMIT_OK = 0;
const EMIT_PARKED = 1;
const EMIT_TOO_LARGE = 2;
/** The peer window is full: nothing staged, the slot waits for a release. */
const EMIT_WINDOW = 3;
