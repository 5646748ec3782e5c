/**
 * The unattached reaper of a node: an anchor no sender attached to within `unattachedTimeout`
 * ends (`ERR_SENDER_DROPPED`; an MPSC anchor without a sender ends cleanly) and is forgotten. One
 * constant timeout means one {@link DeadlineQueue} and one timer for the node, never a timer per
 * anchor.
 */
import { DeadlineQueue } from '../mux/deadline-queue.ts';
import type { StreamAnchor } from './anchor.ts';
import { StreamError } from './errors.ts';
import type { MpscAnchor } from './mpsc-anchor.ts';
import type { NodeState } from './node-state.ts';

/**
 * One unattached deadline (`epoch`: the MPSC anchor's idle period). A stream anchor is queued by
 * local id, not by reference: an anchor that attached and ended long before its deadline (nearly
 * all of them) must not stay reachable, with its bind, ingress slot and slot buffer, for the whole
 * timeout. An entry waits while its anchor is still in the unattached period it was queued for, so
 * the queue drops the others as anchors are watched (deadline-queue.ts): a node that opens tens of
 * thousands of streams a second holds about its unattached anchors, not a timeout's worth of entries.
 */
interface Unattached {
  readonly anchor: bigint | MpscAnchor<unknown>;
  readonly deadline: number;
  readonly epoch: number;
}

export class UnattachedReaper {
  readonly #s: NodeState;
  readonly #queue: DeadlineQueue<Unattached>;
  /** A stream anchor's deadline passed with no sender: fail it and forget it. */
  readonly #expired: (anchor: StreamAnchor<unknown>) => void;
  #timer: unknown = null;

  constructor(state: NodeState, expired: (anchor: StreamAnchor<unknown>) => void) {
    this.#s = state;
    this.#expired = expired;
    // An entry waits while its anchor is still unattached in the period it was queued for: a stream
    // anchor still registered, without a sender, not finished, and not watched again since (one that
    // attached, detached and is unattached again has the full timeout from then on); an MPSC anchor
    // still idle in the same epoch (no class test: the consumer-only client never loads it).
    this.#queue = new DeadlineQueue<Unattached>(({ anchor: id, deadline, epoch }) => {
      if (typeof id !== 'bigint') return !id.finished && id.idleEpoch === epoch;
      const a = state.anchors.get(id);
      return a !== undefined && a._unattachedDeadline === deadline && a.feedKind === 'none' && !a.finished;
    });
  }

  /** Entries queued (for tests: about the unattached anchors, not every anchor of the last timeout). */
  get queued(): number {
    return this.#queue.size;
  }

  /** Start (or restart) a stream anchor's unattached timer; while the node drains nobody may attach, so it ends now. */
  watch(anchor: StreamAnchor<unknown>): void {
    if (this.#s.closed) return;
    if (this.#s.drain !== null) {
      this.#s.drain.unattached(anchor);
      return;
    }
    const deadline = this.#s.runtime.now() + this.#s.unattachedTimeout;
    anchor._unattachedDeadline = deadline;
    this.#queue.push({ anchor: anchor.localId, deadline, epoch: 0 });
    this.#arm();
  }

  /** An MPSC anchor has no sender: it ends after the timeout unless one attaches (at once, cleanly, while the node drains). */
  watchMpsc(anchor: MpscAnchor<unknown>): void {
    if (this.#s.closed) return;
    if (this.#s.drain !== null) {
      anchor._expire(anchor.idleEpoch);
      return;
    }
    this.#queue.push({ anchor, deadline: this.#s.runtime.now() + this.#s.unattachedTimeout, epoch: anchor.idleEpoch });
    this.#arm();
  }

  /** The node closed: no timer, no deadlines. */
  close(): void {
    if (this.#timer !== null) this.#s.runtime.clearTimer(this.#timer);
    this.#timer = null;
    this.#queue.clear();
  }

  #arm(): void {
    const head = this.#queue.peek();
    if (this.#timer !== null || head === undefined) return;
    this.#timer = this.#s.runtime.setTimer(
      () => {
        this.#timer = null;
        this.#expire();
      },
      Math.max(0, head.deadline - this.#s.runtime.now()),
    );
  }

  #expire(): void {
    const s = this.#s;
    // The queue calls back only for entries still waiting (the predicate given in the constructor).
    this.#queue.expire(s.runtime.now(), Number.POSITIVE_INFINITY, (e) => {
      const entry = e.anchor;
      if (typeof entry !== 'bigint') {
        // Still without a sender since it became idle at `epoch`: it ends (cleanly, as in the reference).
        entry._expire(e.epoch);
        return;
      }
      // Still registered, still without a sender: nobody will ever feed it.
      const anchor = s.anchors.get(entry)!;
      anchor._fail(
        new StreamError('ERR_SENDER_DROPPED', `no sender attached within ${s.unattachedTimeout} ms`, {
          retryable: true,
        }),
      );
      this.#expired(anchor);
    });
    this.#arm();
  }
}
