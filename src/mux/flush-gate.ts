/**
 * The flush gate: a pure decision of when a batcher writes its open batch (the
 * policies of `FlushPolicy` in config.ts, and the reply linger). No timers: the batcher passes `now` in and arms
 * one timer at {@link FlushGate.deadline}.
 */
import type { FlushPolicy } from './config.ts';

/** What a staged record is, as far as the gate cares. */
export const StagedKind = {
  /** A Data record (item, sender error, heartbeat): application traffic. */
  Data: 0,
  /** A CreditUpdate reply: waits up to `replyLinger` for company. */
  CreditReply: 1,
  /** Liveness: OpenSlot, CloseSlot (any direction), a terminal pair, a lifecycle reply: urgent. */
  Urgent: 2,
} as const;
export type StagedKind = (typeof StagedKind)[keyof typeof StagedKind];

/** Per-batch flush decision state. */
export class FlushGate {
  readonly #onAdmission: boolean;
  readonly #maxLinger: number;
  readonly #onComplete: boolean;
  readonly #atBytes: number;
  readonly #replyLinger: number;
  /** Records staged in the open batch. */
  staged = 0;
  /** Data records staged in the open batch. */
  stagedData = 0;
  /** A liveness record is staged: write now under every policy. */
  urgent = false;
  /** Time the oldest staged record was staged (NaN when empty). */
  since = Number.NaN;
  /** End of the running reply window (NaN when none). */
  replyDeadline = Number.NaN;
  /** Time of the last write that carried data (for `onComplete`). */
  lastDataWrite = Number.NEGATIVE_INFINITY;

  constructor(policy: FlushPolicy, replyLinger: number) {
    this.#onAdmission = policy.kind === 'auto' && policy.onAdmission;
    this.#maxLinger =
      policy.kind === 'auto' && !policy.onAdmission
        ? (policy.maxLinger ?? Number.POSITIVE_INFINITY)
        : Number.POSITIVE_INFINITY;
    this.#onComplete = policy.kind === 'auto' && !policy.onAdmission && (policy.onComplete ?? false);
    this.#atBytes =
      policy.kind === 'auto' && !policy.onAdmission
        ? (policy.atBytes ?? Number.POSITIVE_INFINITY)
        : Number.POSITIVE_INFINITY;
    this.#replyLinger = replyLinger;
  }

  /**
   * A data record joined a batch that already holds records: only counted, as its time is not
   * needed (the oldest record's is). The token path calls this without reading the clock, and without
   * a time to pass on (a double argument is boxed: 16 bytes per token).
   */
  onStageData(): void {
    this.staged++;
    this.stagedData++;
  }

  /** A record joined the batch at `now`. */
  onStage(now: number, kind: StagedKind): void {
    if (this.staged === 0) this.since = now;
    this.staged++;
    if (kind === StagedKind.Data) this.stagedData++;
    else if (kind === StagedKind.Urgent) this.urgent = true;
    else if (Number.isNaN(this.replyDeadline)) {
      // The window belongs to the first reply; later records do not restart it.
      if (this.#replyLinger === 0) this.urgent = true;
      else this.replyDeadline = now + this.#replyLinger;
    }
  }

  /**
   * Whether to write the open batch now.
   * @param kicked - `flushBatch()` was called since the last write.
   * @param bytes - encoded size of the open batch.
   * @param liveSlots - live owned slots on this lane; `slotsWithData` of them have data staged (for `onComplete`).
   */
  shouldFlush(now: number, kicked: boolean, bytes: number, liveSlots = 0, slotsWithData = 0): boolean {
    if (this.staged === 0) return false;
    if (this.urgent || kicked) return true;
    const nonReply = this.stagedData > 0;
    if (this.#onAdmission && nonReply) return true;
    if (now >= this.replyDeadline) return true; // NaN compares false
    if (!nonReply) return false;
    if (now - this.since >= this.#maxLinger) return true;
    if (bytes >= this.#atBytes) return true;
    if (this.#onComplete && liveSlots > 0 && slotsWithData >= liveSlots && now >= this.lastDataWrite + this.#maxLinger)
      return true;
    return false;
  }

  /** The earliest time a timer should re-check the gate, or NaN when no timer is needed. */
  deadline(): number {
    if (this.staged === 0) return Number.NaN;
    let d = this.replyDeadline;
    if (this.stagedData > 0 && Number.isFinite(this.#maxLinger)) {
      const linger = this.since + this.#maxLinger;
      if (!(d <= linger)) d = linger;
      if (this.#onComplete) {
        const complete = this.lastDataWrite + this.#maxLinger;
        if (complete > this.since && complete < d) d = complete;
      }
    }
    return d;
  }

  /** The batch was written (or discarded) at `now`: the next one starts a fresh window. */
  onWrite(now: number, carriedData: boolean): void {
    if (carriedData) this.lastDataWrite = now;
    this.reset();
  }

  /** Forget the open batch. */
  reset(): void {
    this.staged = 0;
    this.stagedData = 0;
    this.urgent = false;
    this.since = Number.NaN;
    this.replyDeadline = Number.NaN;
  }
}
