/**
 * The lane writer of a node that opens no slot (a client's, `createClient`): it writes the replies
 * of this node's ingress toward one (peer, lane) — CreditUpdate, CloseSlot (close replies and
 * rejects) and LifecycleSlot (a consumer's stop or cancel) — and nothing else. What a batcher does
 * with no slot, with the batcher's own parts: the replies coalesce in the same {@link ControlInbox},
 * are staged by the same `stageReplies` (one CreditUpdate per slot per batch, a cancel's pair in one
 * batch) into the same {@link BatchEncoder} under the same {@link FlushGate}, and a batch is written,
 * parked on admission, and ended by epoch death or retirement as the batcher's is (batcher.ts,
 * batcher-retire.ts; `test/mux/reply-lane.test.ts` holds the two to the same bytes). Without the
 * egress slots, withheld FIFOs, singletons and peer window, a consumer-only bundle leaves the
 * batcher out (docs/size.md).
 */
import type { LanemuxError } from '../errors.ts';
import { WakeSource } from '../metrics/mux-metrics.ts';
import type { Admission, PeerId } from '../messenger/types.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import { MAX_RECORDS_PER_BATCH } from '../wire/constants.ts';
import { BatchEncoder } from '../wire/encoder.ts';
import { stageReplies } from './batcher-control.ts';
import { batchCap, type BatcherHost } from './batcher-host.ts';
import type { DrainLeftovers } from './batcher-retire.ts';
import { ControlInbox } from './control-inbox.ts';
import type { EgressSlot } from './egress-slot.ts';
import { MuxError } from './errors.ts';
import { FlushGate } from './flush-gate.ts';
import type { LaneWriter } from './lane-writer.ts';

const TYPE_COUNT = 6;
const NO_SLOTS: readonly EgressSlot[] = [];

export class ReplyLane implements LaneWriter {
  readonly peer: PeerId;
  readonly lane: number;
  readonly inbox = new ControlInbox();
  readonly liveSlots = 0;
  epoch: bigint;
  batchSeq = 0;
  idleTicks = 0;
  lastHealthCheck = 0;
  retired = false;
  readonly cap: number;
  linkEpoch: number | undefined;
  parked = false;

  // The state `stageReplies` (batcher-control.ts) stages into, as on a batcher.
  readonly host: BatcherHost;
  readonly enc: BatchEncoder;
  readonly gate: FlushGate;
  kicked = false;
  readonly typeCounts = new Uint32Array(TYPE_COUNT);
  /** [peerSlot, credit] pairs staged in the open batch. */
  replies: number[] = [];
  /** The open batch's CreditUpdate per peer SlotId: its record offset, to add later grants into. */
  readonly creditAt = new Map<number, number>();
  /** [peerSlot, credit] pairs of the batch awaiting admission. */
  inflightReplies: number[] = [];
  /** Credit replies a parked, retiring lane could not post back to its closed inbox. */
  leftoverCredit: number[] = [];

  #timer: TimerHandle | null = null;
  #timerAt = Number.NaN;
  #parkToken = 0;
  #wakeScheduled = false;
  #wakeSource: number = WakeSource.frame;
  #inWake = false;
  #scheduleWake = (): void => this.#runWake();
  #onTimer = (): void => {
    this.#timer = null;
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
    this.inbox.onNotify = () => this.wake(WakeSource.control);
  }

  get staged(): number {
    return this.gate.staged;
  }

  get idle(): boolean {
    return this.gate.staged === 0 && !this.parked && !this.inbox.pending;
  }

  slotFor(_id: number): EgressSlot | undefined {
    return undefined;
  }

  slots(): Iterable<EgressSlot> {
    return NO_SLOTS;
  }

  /** Room in the open batch for `needed` more bytes (`pair`: two records that must share it). */
  fits(needed: number, pair: boolean): boolean {
    if (this.enc.recordCount + (pair ? 2 : 1) > MAX_RECORDS_PER_BATCH) return false;
    return this.enc.byteLength + needed <= this.cap;
  }

  kick(): void {
    this.kicked = true;
    if (!this.parked && !this.#inWake) this.#runWake();
  }

  wake(source: number): void {
    if (this.#wakeScheduled || this.#inWake) return;
    this.#wakeScheduled = true;
    this.#wakeSource = source;
    this.host.runtime.macrotask(this.#scheduleWake);
  }

  /** One wake: stage the inbox's replies, then write if the gate says so (the batcher's wake, without slots). */
  #runWake(): void {
    this.#wakeScheduled = false;
    if (this.parked || this.retired) return;
    this.host.metrics.batcherWakes[this.#wakeSource]! += 1;
    this.#wakeSource = WakeSource.frame;
    this.#inWake = true;
    try {
      if (this.inbox.pending) {
        // Owned control never lands here: with no slot published, the inbox refuses it.
        const d = this.inbox.drain();
        if (d.kicked) this.kicked = true;
        stageReplies(this, d);
        if (d.retire) {
          const left = this.retire(undefined, true);
          if (left.credit.length > 0) this.host.repostCredit(this.peer, this.lane, left.credit);
        }
      }
      if (this.retired || this.parked) return;
      if (this.gate.shouldFlush(this.host.runtime.now(), this.kicked, this.enc.byteLength)) {
        this.flush();
        if (!this.parked) this.kicked = false;
      } else if (this.gate.staged === 0) {
        this.kicked = false;
      }
      if (!this.parked) this.#armTimer();
    } finally {
      this.#inWake = false;
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
    if (this.parked || !enc.isOpen) return;
    const count = enc.recordCount;
    if (count === 0) {
      enc.discard();
      this.gate.reset();
      return;
    }
    const payload = enc.finish();
    const m = this.host.metrics;
    for (let t = 0; t < TYPE_COUNT; t++) {
      m.recordsSent[t]! += this.typeCounts[t]!;
      this.typeCounts[t] = 0;
    }
    m.batchesSent++;
    m.recordsPerBatchSent.observe(count);
    m.stagedRecords -= this.gate.staged;
    this.gate.onWrite(this.host.runtime.now(), false);
    if (this.#timer !== null) {
      this.host.runtime.clearTimer(this.#timer);
      this.#timer = null;
      this.#timerAt = Number.NaN;
    }
    this.batchSeq = (this.batchSeq + 1) >>> 0;
    const replies = this.replies;
    this.replies = [];
    let admission: Admission;
    try {
      admission = this.host.sink.sendBatch(this.peer, this.lane, payload, this.linkEpoch);
    } catch (e) {
      admission = Promise.reject(e);
    }
    if (admission === true) return;
    this.parked = true;
    this.inflightReplies = replies;
    const token = ++this.#parkToken;
    admission.then(
      () => {
        if (this.#parkToken !== token || this.retired) return;
        this.#parkToken = 0;
        this.parked = false;
        this.inflightReplies = [];
        this.#runWake();
      },
      (error: unknown) => {
        if (this.#parkToken !== token || this.retired) return;
        this.#parkToken = 0;
        this.parked = false;
        this.epochDeath(
          new MuxError('ERR_EPOCH_DEATH', `the transport refused a batch to ${this.peer} lane ${this.lane}`, {
            cause: error,
            retryable: true,
          }),
        );
        if (!this.retired) this.#runWake();
      },
    );
  }

  #armTimer(): void {
    const at = this.gate.deadline();
    if (Number.isNaN(at)) return;
    if (this.#timer !== null && this.#timerAt <= at) return;
    if (this.#timer !== null) this.host.runtime.clearTimer(this.#timer);
    this.#timerAt = at;
    this.#timer = this.host.runtime.setTimer(this.#onTimer, Math.max(0, at - this.host.runtime.now()));
  }

  /** Epoch death: discard the staged batch, re-post its credit replies, take a new epoch at batch_seq 0 (as `failEpoch`). */
  epochDeath(_error: LanemuxError): void {
    const m = this.host.metrics;
    m.epochDeaths++;
    const lost = [...this.inflightReplies, ...this.replies];
    this.enc.discard();
    m.stagedRecords -= this.gate.staged;
    this.gate.reset();
    this.typeCounts.fill(0);
    this.replies = [];
    this.inflightReplies = [];
    this.parked = false;
    this.#parkToken = 0;
    this.epoch = this.host.nextEpoch();
    this.batchSeq = 0;
    this.linkEpoch = this.host.sink.linkEpoch?.(this.peer);
    if (!this.host.peerAlive(this.peer)) return;
    for (let i = 0; i < lost.length; i += 2) {
      if (this.inbox.postReplyCredit(lost[i]!, lost[i + 1]!)) m.creditReposted += lost[i + 1]!;
      else m.creditLost += lost[i + 1]!;
    }
  }

  /**
   * Stop for good (as `retireBatcher`): `graceful` writes the inbox's last replies; otherwise the
   * staged batch is discarded and the credit replies it held are handed back for the replacement.
   */
  retire(_error?: LanemuxError, graceful = false): DrainLeftovers {
    if (this.retired) return { credit: [] };
    this.retired = true;
    if (this.#timer !== null) {
      this.host.runtime.clearTimer(this.#timer);
      this.#timer = null;
    }
    const credit = this.leftoverCredit;
    this.leftoverCredit = [];
    const d = this.inbox.close();
    if (graceful && !this.parked) {
      stageReplies(this, d);
      this.flush();
      credit.push(...this.leftoverCredit);
      this.leftoverCredit = [];
      return { credit };
    }
    const m = this.host.metrics;
    m.stagedRecords -= this.gate.staged;
    this.gate.reset();
    this.enc.discard();
    this.typeCounts.fill(0);
    credit.push(...this.replies);
    this.replies = [];
    for (const [slot, e] of d.replies) if (e.credit > 0) credit.push(slot, e.credit);
    return { credit };
  }
}
