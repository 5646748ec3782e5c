/**
 * The control-record writer of one (peer, lane): the replies of this node's ingress —
 * CreditUpdate, CloseSlot (close replies and rejects) and LifecycleSlot (a consumer's stop or
 * cancel) — coalesced in a {@link ControlInbox}, staged into one reusable {@link BatchEncoder}
 * (one CreditUpdate per slot per batch, a cancel's pair in one batch), written under the
 * {@link FlushGate}, parked while a write awaits admission, and ended by epoch death or retirement.
 *
 * A client's lane (`createClient`) is this and nothing else. A node's {@link Batcher} is this plus
 * its egress slots (batcher.ts): it stages its slots' records into the same open batch and fills
 * in the hooks below (the protected methods), so both write the same bytes by the same code.
 * Without the batcher's slots, withheld FIFOs, singletons and peer window, a consumer-only bundle
 * leaves the batcher out (docs/size.md).
 *
 * The state is plain fields, not `#private`: the batcher's files (batcher-*.ts) act on it too.
 */
import type { LanemuxError } from '../errors.ts';
import { WakeSource } from '../metrics/mux-metrics.ts';
import type { Admission, PeerId } from '../messenger/types.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import {
  type CloseReason,
  LifecycleAction,
  MAX_RECORDS_PER_BATCH,
  RECORD_HEADER_LEN,
  RecordType,
} from '../wire/constants.ts';
import { BatchEncoder } from '../wire/encoder.ts';
import { batchCap, type BatcherHost } from './batcher-host.ts';
import { ControlInbox, type InboxDrain } from './control-inbox.ts';
import type { EgressSlot } from './egress-slot.ts';
import { MuxError } from './errors.ts';
import { FlushGate, StagedKind } from './flush-gate.ts';
import type { LaneWriter } from './lane-writer.ts';

const TYPE_COUNT = 6;
/** The reply list of a written batch that carried none (shared: never written to). */
const NO_REPLIES: number[] = [];
const NO_SLOTS: readonly EgressSlot[] = [];
/** A LifecycleSlot record: header + session id + action. */
const LIFECYCLE_RECORD_LEN = RECORD_HEADER_LEN + 9;

/** Credit replies a retired lane writer still held, to hand to its replacement. */
export interface DrainLeftovers {
  credit: number[];
}

/** The control-record writer of one (peer, lane); a client's lane writer as it is. */
export class ReplyLane implements LaneWriter {
  readonly peer: PeerId;
  readonly lane: number;
  readonly inbox = new ControlInbox();
  epoch: bigint;
  batchSeq = 0;
  /** Live owned slots (a batcher's; always 0 here). */
  liveSlots = 0;
  /** Sweep ticks spent idle (for eviction). */
  idleTicks = 0;
  retired = false;
  /** The effective batch cap in bytes. */
  readonly cap: number;
  /** The connection epoch this writer's batches are pinned to (undefined: the transport has none). */
  linkEpoch: number | undefined;
  /** True while a write awaits admission. */
  parked = false;

  readonly host: BatcherHost;
  readonly enc: BatchEncoder;
  readonly gate: FlushGate;
  /** A `flushBatch()` or an inbox kick asked for the next wake to write. */
  kicked = false;
  /** True while a wake runs (a record staged meanwhile needs no wake of its own). */
  inWake = false;
  timer: TimerHandle | null = null;
  // Open batch bookkeeping.
  readonly typeCounts = new Uint32Array(TYPE_COUNT);
  /** [peerSlot, credit] pairs staged in the open batch. */
  replies: number[] = [];
  /** The open batch's CreditUpdate per peer SlotId: its record offset, to add later grants into. */
  readonly creditAt = new Map<number, number>();
  /** [peerSlot, credit] pairs of the batch awaiting admission. */
  inflightReplies: number[] = NO_REPLIES;
  /** Credit replies a parked, retiring writer could not post back to its closed inbox. */
  leftoverCredit: number[] = [];
  /** Identifies the write the writer is parked on (0: none). */
  parkToken = 0;

  #wakeScheduled = false;
  #wakeSource: number = WakeSource.frame;
  #timerAt = Number.NaN;
  /** The clock when the inbox last went from empty to pending: its oldest reply's post. */
  #postedAt = Number.NaN;
  // A wake run early by afterIngress leaves its macrotask behind: that one then finds nothing to do.
  #scheduleWake = (): void => {
    if (this.#wakeScheduled) this.#runWake();
  };
  #onTimer = (): void => {
    this.timer = null;
    this.#timerAt = Number.NaN;
    this.#wakeSource = WakeSource.linger;
    this.#runWake();
  };

  constructor(host: BatcherHost, peer: PeerId, lane: number) {
    this.host = host;
    this.peer = peer;
    this.lane = lane;
    this.epoch = host.nextEpoch();
    this.linkEpoch = host.sink.linkEpoch?.(peer);
    this.cap = batchCap(host.config.maxBatchBytes, host.sink.maxMessageSize(peer));
    this.enc = new BatchEncoder({ maxBytes: this.cap, initialBytes: Math.min(this.cap, 16_384) });
    this.gate = new FlushGate(host.config.flushPolicy, host.config.replyLinger);
    this.inbox.onNotify = () => {
      this.#postedAt = host.runtime.now();
      this.wake(WakeSource.control);
    };
  }

  /** Records staged in the open batch. */
  get staged(): number {
    return this.gate.staged;
  }

  /** True when the writer holds nothing: no live slots, nothing staged or pending. */
  get idle(): boolean {
    return this.liveSlots === 0 && this.gate.staged === 0 && !this.parked && !this.inbox.pending;
  }

  /** The owned slot for a SlotId at its live generation, if any (a reply lane owns none). */
  slotFor(_id: number): EgressSlot | undefined {
    return undefined;
  }

  /** Every live owned slot. */
  slots(): Iterable<EgressSlot> {
    return NO_SLOTS;
  }

  /** Room in the open batch for `needed` more bytes (`pair`: two records that must share it). */
  fits(needed: number, pair: boolean): boolean {
    // A terminal and its close (or a cancel's close and lifecycle) need two record slots and must share a batch.
    if (this.enc.recordCount + (pair ? 2 : 1) > MAX_RECORDS_PER_BATCH) return false;
    return this.enc.byteLength + needed <= this.cap;
  }

  // ───────────────────────── waking and flushing ─────────────────────────

  /** `flushBatch()`: kick and run a wake now (synchronous; never throws). */
  kick(): void {
    this.kicked = true;
    if (!this.parked && !this.inWake) this.#runWake();
  }

  /**
   * An inbound batch from this lane's peer was handled: what the reply linger or a timer would
   * write by now is written at once. A busy socket holds the event loop in its reads for many
   * batches (libuv takes up to 32 chunks per readiness) before the wake's macrotask or the timer
   * runs, and a credit grant held that long leaves its sender without credit.
   */
  afterIngress(): void {
    if (this.parked || this.retired || this.inWake) return;
    if (!this.#wakeScheduled && this.timer === null) return;
    const now = this.host.runtime.now();
    const replyDue = this.#wakeScheduled && this.inbox.pending && now >= this.#postedAt + this.host.config.replyLinger;
    if (!replyDue && !(now >= this.#timerAt)) return;
    this.#wakeSource = WakeSource.linger;
    try {
      this.#runWake();
    } catch (e) {
      // What throws in a wake throws where the wake would have run (a macrotask), not into the ingress path.
      this.host.runtime.macrotask(() => {
        throw e;
      });
    }
  }

  /** Schedule one wake (a macrotask) unless one is scheduled or running; `source` is what is counted. */
  wake(source: number): void {
    if (this.#wakeScheduled || this.inWake) return;
    this.#wakeScheduled = true;
    this.#wakeSource = source;
    this.host.runtime.macrotask(this.#scheduleWake);
  }

  /** One wake: stage what waits ({@link stageWake}), then write if the gate says so. */
  #runWake(): void {
    this.#wakeScheduled = false;
    if (this.parked || this.retired) return;
    this.host.metrics.batcherWakes[this.#wakeSource]! += 1;
    this.#wakeSource = WakeSource.frame;
    this.inWake = true;
    try {
      this.stageWake();
      if (this.retired || this.parked) return;
      const now = this.host.runtime.now();
      if (this.gate.shouldFlush(now, this.kicked, this.enc.byteLength, this.liveSlots, this.slotsWithData())) {
        this.flush();
        if (!this.parked) this.kicked = false;
      } else if (this.gate.staged === 0) {
        this.kicked = false;
      }
      if (!this.parked) this.#armTimer();
    } finally {
      this.inWake = false;
      // A post made during this wake (an owner callback posting to this inbox) found the wake
      // running and was not scheduled: schedule it now, or it would wait for an unrelated post.
      if (this.inbox.pending && !this.parked && !this.retired) this.wake(WakeSource.control);
    }
  }

  /** What a wake stages before the gate decides: here the inbox's replies (a batcher adds its slots' records). */
  protected stageWake(): void {
    if (this.inbox.pending) this.applyInbox();
  }

  /** Owned slots with Data in the open batch (for the gate's `onComplete`; none here). */
  protected slotsWithData(): number {
    return 0;
  }

  /**
   * One wake's inbox drain: peer replies staged first, then owned control ({@link applyOwned}),
   * then a posted retirement, which writes the last replies.
   */
  protected applyInbox(): void {
    const d = this.inbox.drain();
    if (d.kicked) this.kicked = true;
    this.stageReplies(d);
    if (!this.applyOwned(d)) return;
    if (d.retire) {
      const left = this.retire(undefined, true);
      if (left.credit.length > 0) this.host.repostCredit(this.peer, this.lane, left.credit);
    }
  }

  /**
   * Owned control of a drain (a batcher's slots); false when it ended the epoch. With no slot
   * published, the inbox refuses owned control, so none lands here.
   */
  protected applyOwned(_d: InboxDrain): boolean {
    return true;
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
    this.batchSeq = (this.batchSeq + 1) >>> 0;
    // A batch takes its reply list with it only when it has one (no fresh array per write).
    let replies = NO_REPLIES;
    if (this.replies.length > 0) {
      replies = this.replies;
      this.replies = [];
    }
    this.sealWrite();
    let admission: Admission;
    try {
      admission = this.host.sink.sendBatch(this.peer, this.lane, payload, this.linkEpoch);
    } catch (e) {
      admission = Promise.reject(e);
    }
    if (admission === true) {
      this.admitted();
      return;
    }
    this.parked = true;
    this.inflightReplies = replies;
    // The settlement belongs to this write only: epoch death or retirement in between voids it.
    this.awaitAdmission(admission, ++this.parkToken);
  }

  /** The batch is being written: what else it carries moves with it (a batcher's slots); nothing here. */
  protected sealWrite(): void {}

  /** The written batch was admitted (at once, or on unparking). */
  protected admitted(): void {}

  /** Wait for the admission of the write parked on `token`. */
  protected awaitAdmission(admission: Promise<unknown>, token: number): void {
    admission.then(
      () => this.unpark(token),
      (error: unknown) => this.refused(token, error),
    );
  }

  /** The parked write `token` was admitted: write what waited. */
  protected unpark(token: number): void {
    if (this.parkToken !== token || this.retired) return;
    this.parkToken = 0;
    this.parked = false;
    this.inflightReplies = NO_REPLIES;
    this.admitted();
    this.#runWake();
  }

  /** The transport refused the parked write `token`: epoch death. */
  protected refused(token: number, error: unknown): void {
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
  }

  #armTimer(): void {
    const at = this.gate.deadline();
    if (Number.isNaN(at)) return;
    if (this.timer !== null && this.#timerAt <= at) return;
    if (this.timer !== null) this.host.runtime.clearTimer(this.timer);
    this.#timerAt = at;
    this.timer = this.host.runtime.setTimer(this.#onTimer, Math.max(0, at - this.host.runtime.now()));
  }

  // ───────────────────────── replies ─────────────────────────

  /**
   * Peer replies: CreditUpdate first, then CloseSlot/RejectSlot, then lifecycle. A cancel's
   * CloseSlot{UnknownSlot} and LifecycleSlot{cancel} go as a pair in one batch (docs/protocol.md §10.3): the producer
   * then applies both in one drain, lifecycle first, even when the replies fill several batches.
   */
  stageReplies(d: InboxDrain): void {
    // The linger counts from the oldest reply's post, not from the wake that stages it.
    const clock = this.host.runtime.now();
    const now = this.#postedAt <= clock ? this.#postedAt : clock;
    // By value (an entry holds its key): entries() would make an array per reply.
    for (const e of d.replies.values())
      if (e.credit > 0) this.#stageControl(now, RecordType.CreditUpdate, e.slot, e.credit, 0n);
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
    for (const e of d.replies.values())
      if (e.close >= 0) this.#stageControl(now, RecordType.CloseSlot, e.slot, e.close, 0n);
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
    const enc = this.enc;
    if (type === RecordType.CreditUpdate && !this.parked && enc.isOpen) {
      const at = this.creditAt.get(peerSlot);
      if (at !== undefined && enc.addToCreditUpdate(at, value)) {
        this.replies.push(peerSlot, value);
        return;
      }
    }
    const body = type === RecordType.CreditUpdate ? 4 : type === RecordType.CloseSlot ? 1 : 9;
    if (!this.parked && !enc.isOpen) this.begin();
    if (this.parked || !this.fits(RECORD_HEADER_LEN + body + pairBytes, pairBytes > 0)) {
      this.flush();
      if (this.parked) {
        // Taken from the inbox but not stageable until admission: post it back (coalesced, never
        // lost); a retiring writer's closed inbox hands credit to its replacement instead.
        if (type === RecordType.CreditUpdate) {
          if (!this.inbox.postReplyCredit(peerSlot, value)) this.leftoverCredit.push(peerSlot, value);
        } else if (type === RecordType.CloseSlot) this.inbox.postReplyClose(peerSlot, value);
        else this.inbox.postReplyLifecycle(peerSlot, session, value === LifecycleAction.Cancel);
        return;
      }
      this.begin();
    }
    if (type === RecordType.CreditUpdate) {
      this.creditAt.set(peerSlot, enc.byteLength);
      enc.appendCreditUpdate(peerSlot, 0, value);
      this.replies.push(peerSlot, value);
    } else if (type === RecordType.CloseSlot) {
      enc.appendCloseSlot(peerSlot, 0, value as CloseReason);
    } else {
      enc.appendLifecycleSlot(peerSlot, 0, session, value as LifecycleAction);
    }
    this.typeCounts[type]! += 1;
    this.gate.onStage(now, type === RecordType.CreditUpdate ? StagedKind.CreditReply : StagedKind.Urgent);
    this.host.metrics.stagedRecords++;
  }

  // ───────────────────────── failure and retirement ─────────────────────────

  /**
   * Epoch death (docs/protocol.md §3.5, §10.1): discard the staged batch, re-post its credit
   * replies, take a new epoch at batch_seq 0; a batcher also fails every live slot once ({@link epochEnded}).
   */
  epochDeath(error: LanemuxError): void {
    const m = this.host.metrics;
    m.epochDeaths++;
    const lost = [...this.inflightReplies, ...this.replies];
    this.discardBatch();
    this.replies = [];
    this.inflightReplies = NO_REPLIES;
    this.parked = false;
    this.parkToken = 0;
    this.epoch = this.host.nextEpoch();
    this.batchSeq = 0;
    this.linkEpoch = this.host.sink.linkEpoch?.(this.peer);
    // The new epoch is in place before any owner callback runs: a callback that re-opens a slot
    // at once must find a consistent writer.
    this.epochEnded(error);
    if (!this.host.peerAlive(this.peer)) return;
    for (let i = 0; i < lost.length; i += 2) {
      if (this.inbox.postReplyCredit(lost[i]!, lost[i + 1]!)) m.creditReposted += lost[i + 1]!;
      else m.creditLost += lost[i + 1]!;
    }
  }

  /** The old epoch's staged batch is gone and the new epoch in place (a batcher fails its slots). */
  protected epochEnded(_error: LanemuxError): void {}

  /** Drop the open batch unsent: its records are not counted as sent. */
  protected discardBatch(): void {
    this.enc.discard();
    this.host.metrics.stagedRecords -= this.gate.staged;
    this.gate.reset();
    this.typeCounts.fill(0);
  }

  /**
   * Stop for good. Later posts are refused, so writers re-resolve a fresh one.
   *
   * - `graceful` (a `retire` posted to the inbox, applied at a wake) and not parked: the inbox's
   *   last drain is written in a final flush, so a close or credit posted during retirement is
   *   never lost.
   * - otherwise (eviction, cancel, teardown): the staged batch is discarded (its records are not
   *   counted as sent), and the credit replies it held or that were still in the inbox are
   *   returned for the caller to re-post to the replacement.
   */
  retire(error?: LanemuxError, graceful = false): DrainLeftovers {
    if (this.retired) return { credit: [] };
    this.retired = true;
    if (this.timer !== null) {
      this.host.runtime.clearTimer(this.timer);
      this.timer = null;
    }
    const gracefully = this.retiring(error, graceful);
    const credit = this.leftoverCredit;
    this.leftoverCredit = [];
    const d = this.inbox.close();
    if (gracefully) {
      if (!this.parked) {
        this.stageReplies(d);
        this.flush();
      } else for (const e of d.replies.values()) if (e.credit > 0) credit.push(e.slot, e.credit);
      credit.push(...this.leftoverCredit);
      this.leftoverCredit = [];
      return { credit };
    }
    this.discardBatch();
    credit.push(...this.replies);
    this.replies = [];
    for (const e of d.replies.values()) if (e.credit > 0) credit.push(e.slot, e.credit);
    return { credit };
  }

  /**
   * Retirement's first step, before the inbox closes (a batcher's slots and waiting opens);
   * answers whether the last replies are written (graceful and not parked).
   */
  protected retiring(_error: LanemuxError | undefined, graceful: boolean): boolean {
    return graceful && !this.parked;
  }
}
