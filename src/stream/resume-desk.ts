/**
 * The consumer's half of resume (docs/protocol.md §8.3), shared by single-sender and MPSC anchors:
 * the streams suspended by a lost link (by session, each with its resume window), the older names
 * of resumed streams (a resume's answer can be lost with the link), and the answer to a resume
 * attach. What differs per anchor kind — how many items reached it, where the next bind's records
 * are read — is the {@link ResumeTarget} of each bind.
 */
import type { PeerId } from '../messenger/types.ts';
import type { Bind } from '../mux/bind.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import { ResumeFailedError } from './errors.ts';
import type { NodeState } from './node-state.ts';

/** One bind's stream as the desk sees it (the bind's owner implements it). */
export interface ResumeTarget {
  /** The anchor: a resume must name the anchor its stream was suspended on. */
  readonly anchor: object;
  /** False once the anchor takes no resume (it ended, or the node forgot it). */
  readonly open: boolean;
  /** Items of the stream that reached the anchor through `bind`, read or not; null when `bind` no longer feeds it. */
  received(bind: Bind): number | null;
  /** Records of the stream still unread (the new bind's credit leaves room for them). */
  unread(bind: Bind): number;
  /** `bind`'s link was lost: its records are read, then the stream waits. */
  suspended(bind: Bind): void;
  /** The stream of suspended `old` goes on on `fresh`: read right after `old`'s records. */
  resumed(old: Bind, fresh: Bind): void;
  /** Suspended `bind` was not resumed: the stream ends with `error` after its records. */
  resumeFailed(bind: Bind, error: ResumeFailedError): void;
}

/** The `resume` field of a resume attach. */
export interface ResumeRequest {
  readonly session: bigint;
  readonly sent: number;
  readonly from: number;
}

/** A refused resume, as the attach answers it. */
export interface ResumeRefusal {
  readonly Err: { readonly reason: string; readonly resume?: string };
}

interface Suspension {
  readonly target: ResumeTarget;
  readonly bind: Bind;
  readonly peer: PeerId;
  /** Items of the stream the consumer has received (the resume offset). */
  readonly received: number;
  readonly timer: TimerHandle;
}

/** The sessions a resumed stream was known by before its newest bind. */
interface ResumeAlias {
  readonly anchor: object;
  /** The stream's newest bind. */
  to: Bind;
  readonly names: bigint[];
}

/** The answer to a resume of a stream this node does not know (finished, never suspended, or another peer's). */
export const RESUME_UNKNOWN: ResumeRefusal = {
  Err: { reason: 'resume: this node does not know the stream', resume: 'unknown' },
};

/** A node's suspended consumer streams. */
export class ResumeDesk {
  readonly #s: NodeState;
  readonly #suspended = new Map<bigint, Suspension>();
  /** Items a resumed bind's stream had before it: its resume offset. */
  readonly #base = new WeakMap<Bind, number>();
  /** Older sessions of streams resumed on a bind not yet claimed: until the claim proves the producer knows the new one. */
  readonly #aliases = new Map<bigint, ResumeAlias>();

  constructor(state: NodeState) {
    this.#s = state;
  }

  /**
   * The link of `bind` was lost: keep its stream for the producer's resume when both nodes
   * advertise resume; false lets it end Dropped as without resume.
   */
  suspend(target: ResumeTarget, bind: Bind, resuming?: PeerId): boolean {
    const resume = this.#s.resumePeers;
    // `resuming`: a pre-bind no OpenSlot claimed (its first batch was lost with the link) names no peer.
    const peer = bind.peer ?? bind.slot?.peer ?? resuming ?? null;
    if (resume === null || peer === null || this.#s.closed || !resume.negotiated(peer) || !target.open) return false;
    const n = target.received(bind);
    if (n === null) return false;
    const session = bind.sessionId;
    const timer = this.#s.runtime.setTimer(() => this.#notResumed(session), resume.windowMs);
    this.#suspended.set(session, { target, bind, peer, received: (this.#base.get(bind) ?? 0) + n, timer });
    target.suspended(bind);
    return true;
  }

  /** True while some stream waits for its producer's resume. */
  get waiting(): boolean {
    return this.#suspended.size > 0;
  }

  /**
   * The producer's node restarted (`how`: it came back as another instance, or another worker took
   * its address; docs/protocol.md §8.3, `restarted`): its replay rings are gone, so its suspended
   * streams end now rather than when their resume window passes.
   */
  peerRestarted(peer: PeerId, how: string): void {
    for (const [session, sus] of this.#suspended) {
      if (sus.peer !== peer) continue;
      this.#suspended.delete(session);
      this.#s.runtime.clearTimer(sus.timer);
      this.#s.metrics.resumeFailed('restarted');
      sus.target.resumeFailed(
        sus.bind,
        new ResumeFailedError(
          'ERR_SENDER_DROPPED',
          'restarted',
          `the sender's node (${peer}) ${how}: the stream cannot be resumed`,
        ),
      );
    }
  }

  /** The resume window of a suspended stream passed: it ends `ERR_SENDER_DROPPED` after its unread items. */
  #notResumed(session: bigint): void {
    const sus = this.#suspended.get(session);
    if (sus === undefined) return;
    this.#suspended.delete(session);
    const ms = this.#s.resumePeers?.windowMs ?? 0;
    this.#s.metrics.resumeFailed('window');
    sus.target.resumeFailed(
      sus.bind,
      new ResumeFailedError(
        'ERR_SENDER_DROPPED',
        'window',
        `the link to the sender (${sus.peer}) was lost and the stream was not resumed within ${ms} ms`,
      ),
    );
  }

  /**
   * A resume attach from `from` to `anchor` (undefined: unknown here): the new bind (made by
   * `fresh` with its credit, for the stream of the suspended bind's `target`) and the offset to
   * answer, or the refusal.
   */
  resume(
    from: PeerId,
    anchor: object | undefined,
    anchorId: bigint,
    resume: ResumeRequest,
    fresh: (credit: number, target: ResumeTarget) => Bind,
  ): { readonly bind: Bind; readonly offset: number } | ResumeRefusal {
    const mux = this.#s.mux;
    if (mux === null || anchor === undefined) return RESUME_UNKNOWN;
    const alias = this.#aliases.get(resume.session);
    const session = alias?.anchor === anchor ? alias.to.sessionId : resume.session;
    let sus = this.#suspended.get(session);
    // The new link came up before the old one was reported lost: the old slot still looks live.
    if (sus === undefined && mux.suspendLive(anchorId, session, from)) sus = this.#suspended.get(session);
    if (sus === undefined || sus.target.anchor !== anchor || sus.peer !== from || !sus.target.open)
      return RESUME_UNKNOWN;
    if (resume.sent < sus.received)
      return {
        Err: { reason: `resume: ${sus.received} items were received but the sender says it sent ${resume.sent}` },
      };
    this.#suspended.delete(session);
    this.#s.runtime.clearTimer(sus.timer);
    if (resume.from > sus.received + 1) {
      // The producer no longer holds the items this consumer lacks: the stream cannot go on.
      const reason = `replay evicted: the consumer has ${sus.received} items and the producer can send again only from item ${resume.from}`;
      this.#s.metrics.resumeFailed('evicted');
      sus.target.resumeFailed(sus.bind, new ResumeFailedError('ERR_SENDER_DROPPED', 'evicted', reason));
      return { Err: { reason, resume: 'evicted' } };
    }
    // Records still unread count against the new window: the consumer holds at most C+1 of this stream.
    const bind = fresh(Math.max(1, this.#s.config.initialCredit - sus.target.unread(sus.bind)), sus.target);
    this.#base.set(bind, sus.received);
    const names: ResumeAlias = alias?.anchor === anchor ? alias : { anchor, to: bind, names: [] };
    names.to = bind;
    for (const name of [resume.session, session])
      if (!names.names.includes(name)) {
        names.names.push(name);
        this.#aliases.set(name, names);
      }
    sus.target.resumed(sus.bind, bind);
    this.#s.metrics.resumedStreams++;
    this.#s.metrics.anchorOperation('resume', 'success', 'mux');
    return { bind, offset: sus.received };
  }

  /**
   * Take back the suspension of `bind` (the stream of `anchor`, from `from`) without resuming it: an
   * attach made again after its answer was lost replaces the bind. A bind whose loss is not reported
   * yet is suspended first. False if `bind` is not suspended for `anchor`.
   */
  take(anchor: object, bind: Bind, from: PeerId): boolean {
    const session = bind.sessionId;
    let sus = this.#suspended.get(session);
    if (sus === undefined && this.#s.mux?.suspendLive(bind.anchorId, session, from) === true)
      sus = this.#suspended.get(session);
    if (sus === undefined || sus.target.anchor !== anchor || sus.bind !== bind) return false;
    this.#suspended.delete(session);
    this.#s.runtime.clearTimer(sus.timer);
    return true;
  }

  /** An OpenSlot claimed `bind`: its producer knows its session, older names of the stream go. */
  claimed(bind: Bind): void {
    if (this.#aliases.size === 0) return;
    for (const [session, alias] of this.#aliases) if (alias.to === bind) this.#aliases.delete(session);
  }

  /** Forget the suspended streams of `anchor` (it ended), or all of them (`null`: the node closes). */
  drop(anchor: object | null): void {
    if (this.#suspended.size === 0 && this.#aliases.size === 0) return;
    for (const [session, sus] of this.#suspended) {
      if (anchor !== null && sus.target.anchor !== anchor) continue;
      this.#s.runtime.clearTimer(sus.timer);
      this.#suspended.delete(session);
    }
    for (const [session, alias] of this.#aliases)
      if (anchor === null || alias.anchor === anchor) this.#aliases.delete(session);
  }
}
