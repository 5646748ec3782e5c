/**
 * `node.drain()`: a graceful drain for deploys. The node takes no new streams (local creates and
 * attaches, and peers' attaches, fail `ERR_DRAINING`, retryable), tells every peer with a draining
 * notice (docs/protocol.md §8.4) that keeps the link up, lets every live stream finish, and ends
 * what is left at the deadline with `ERR_DRAINING`. Anchors still waiting for a sender, which none
 * may now attach, end with it at once.
 *
 * Liveness is counted, not tracked per stream: no stream is created while the node drains, so
 * the node's anchors, MPSC anchors and live senders, plus the mux's egress (terminals still queued or
 * unwritten) and resumable streams waiting for their link, are all there is to wait for. Each end
 * pokes the drain; the egress tail is polled on the node's clock.
 */
import * as z from '../schema.ts';
import type { PeerId, PeerInfo } from '../messenger/types.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import { int, parseOptions } from '../validate.ts';
import type { StreamAnchor } from './anchor.ts';
import {
  DRAIN_HANDLER,
  DRAIN_KEY,
  PHASE_DEADLINE,
  PHASE_DRAINING,
  drainingError,
  encodeDrainNotice,
} from './drain-notice.ts';
import type { StreamError } from './errors.ts';
import type { MpscAnchor } from './mpsc-anchor.ts';
import type { NodeState } from './node-state.ts';

/** Default drain timeout, ms (30 s). */
export const DEFAULT_DRAIN_TIMEOUT = 30_000;
/** Longest drain timeout, ms: one day. */
export const MAX_DRAIN_TIMEOUT = 86_400_000;
/** How often the drain looks at the egress once every stream has ended (terminals still being written). */
const EGRESS_POLL_MS = 10;

/** Options of `node.drain()`. */
export interface DrainOptions {
  /**
   * Most ms the live streams get to finish; the ones left then end with `ERR_DRAINING`. An integer
   * from 0 (end them at once) to 86,400,000. Defaults to 30,000.
   */
  readonly timeout?: number;
}

/**
 * What `node.drain()` resolves with. Each anchor (single or MPSC) and each sender of this node is
 * one stream (a same-worker stream is two).
 */
export interface DrainSummary {
  /** Streams live when the drain began (or opened by an attach already under way) that ended before the deadline. */
  readonly finished: number;
  /**
   * Streams the drain ended with `ERR_DRAINING`: anchors still waiting for a sender when it began
   * (or when their sender detached), and the streams still live at the deadline or at `close()`.
   */
  readonly ended: number;
}

const optionsSchema = z.strictObject({ timeout: z.optional(int(0, MAX_DRAIN_TIMEOUT)) });

/** Validate `drain()`'s options: a {@link ConfigError} naming the bad field otherwise. */
export function drainTimeout(options: unknown): number {
  return parseOptions(optionsSchema, options, 'drain').timeout ?? DEFAULT_DRAIN_TIMEOUT;
}

/** How the drain ends a stream (the node's sides do it). */
export interface DrainHost {
  /** End `anchor` now with `error`: its reader sees it, its sender is told, the node forgets it. */
  endAnchor(anchor: StreamAnchor<unknown>, error: StreamError): void;
  /** End an MPSC anchor now with `error` (every sender's slot closes). */
  endMpsc(anchor: MpscAnchor<unknown>, error: StreamError): void;
}

/** One drain of one node. */
export class NodeDrain {
  /** What `drain()` returns, every time. */
  readonly promise: Promise<DrainSummary>;
  readonly #s: NodeState;
  readonly #host: DrainHost;
  readonly #timeout: number;
  readonly #deadlineAt: number;
  #resolve!: (summary: DrainSummary) => void;
  #phase = PHASE_DRAINING;
  #done = false;
  /** Ends counted now are the drain's own (they go to `ended`, already counted). */
  #ending = false;
  #finished = 0;
  #ended = 0;
  #deadlineTimer: TimerHandle | null = null;
  #pollTimer: TimerHandle | null = null;
  readonly #unsubscribe: () => void;

  constructor(s: NodeState, host: DrainHost, timeout: number) {
    this.#s = s;
    this.#host = host;
    this.#timeout = timeout;
    this.#deadlineAt = s.runtime.now() + timeout;
    this.promise = new Promise((resolve) => (this.#resolve = resolve));
    // Links formed while the node drains (a reconnect, a new peer) are told too.
    this.#unsubscribe = s.messenger.onPeer((info) => this.#tell(info));
  }

  /** Begin: tell the peers, end what waits for a sender, arm the deadline. */
  start(): void {
    for (const p of this.#s.messenger.peers()) this.#tell(p);
    const error = drainingError('the node is draining: no sender attached to this anchor, and none may attach now');
    this.#ending = true;
    for (const a of [...this.#s.anchors.values()]) if (waitsForSender(a)) this.#endAnchor(a, error);
    for (const a of [...this.#s.mpscAnchors.values()])
      if (a.senders === 0 && !a.finished) {
        this.#ended++;
        this.#host.endMpsc(a, error);
      }
    this.#ending = false;
    this.#deadlineTimer = this.#s.runtime.setTimer(() => {
      this.#deadlineTimer = null;
      this.#endAll(
        `the node drained: the stream did not finish within the drain timeout (${this.#timeout} ms)`,
        PHASE_DEADLINE,
      );
    }, this.#timeout);
    this.#check();
  }

  /** A stream of the node ended: count it, and resolve once nothing is left. */
  poke(): void {
    if (this.#done) return;
    if (!this.#ending) this.#finished++;
    this.#check();
  }

  /** The last sender of `anchor` detached while the node drains: nobody may attach again, so it ends. */
  unattached(anchor: StreamAnchor<unknown>): void {
    if (this.#done || anchor.finished) return;
    this.#ending = true;
    this.#endAnchor(anchor, drainingError('the node is draining: the sender detached, and no new sender may attach'));
    this.#ending = false;
  }

  /** The node closes during the drain: the streams left end now, and the drain resolves. */
  closing(): void {
    this.#endAll('the node closed while draining, before the stream finished', PHASE_DEADLINE);
  }

  /** The node closed: no more notices. */
  dispose(): void {
    this.#unsubscribe();
    this.#clearTimers();
  }

  #endAnchor(anchor: StreamAnchor<unknown>, error: StreamError): void {
    this.#ended++;
    this.#host.endAnchor(anchor, error);
  }

  #check(): void {
    const s = this.#s;
    if (this.#done || this.#deadlineTimer === null) return;
    if (s.anchors.size + s.mpscAnchors.size + s.liveSenders.size > 0) return;
    // Every stream ended here: wait until what they handed over is written (and resumed, if a link was lost).
    if (!(s.mux?.egressIdle ?? true) || (s.resume?.waiting ?? false)) {
      this.#pollTimer ??= s.runtime.setTimer(() => {
        this.#pollTimer = null;
        this.#check();
      }, EGRESS_POLL_MS);
      return;
    }
    this.#finish();
  }

  #endAll(message: string, phase: number): void {
    if (this.#done) return;
    this.#clearTimers();
    const s = this.#s;
    // Peers hear the deadline on every lane before any slot it closes (they then report ERR_DRAINING).
    this.#phase = phase;
    for (const p of s.messenger.peers()) this.#tell(p);
    const error = drainingError(message);
    this.#ending = true;
    this.#ended += s.anchors.size + s.mpscAnchors.size + s.liveSenders.size;
    for (const a of [...s.anchors.values()]) this.#host.endAnchor(a, error);
    for (const a of [...s.mpscAnchors.values()]) this.#host.endMpsc(a, error);
    for (const sender of [...s.liveSenders]) sender._depart(error);
    this.#ending = false;
    this.#finish();
  }

  #finish(): void {
    this.#done = true;
    this.#clearTimers();
    this.#resolve({ finished: this.#finished, ended: this.#ended });
  }

  #clearTimers(): void {
    const rt = this.#s.runtime;
    if (this.#deadlineTimer !== null) rt.clearTimer(this.#deadlineTimer);
    if (this.#pollTimer !== null) rt.clearTimer(this.#pollTimer);
    this.#deadlineTimer = this.#pollTimer = null;
  }

  /** Send the notice to `peer` on every lane, if it speaks drain (docs/protocol.md §8.4). */
  #tell(peer: PeerInfo): void {
    if (!peer.transportKeys.includes(DRAIN_KEY)) return;
    const m = this.#s.messenger;
    const id: PeerId = peer.id;
    const ms = this.#phase === PHASE_DRAINING ? this.#deadlineAt - this.#s.runtime.now() : 0;
    const payload = encodeDrainNotice(this.#phase, ms);
    const lanes = m.lanes(id);
    for (let lane = 0; lane < lanes; lane++) {
      try {
        const a = m.send(id, lane, DRAIN_HANDLER, payload);
        if (a !== true) a.then(undefined, noop);
        this.#s.metrics.drainNoticesSent++;
      } catch {
        // The link went meanwhile: a new one is told when it forms.
      }
    }
  }
}

const noop = (): void => {};

/** An anchor no sender feeds or is about to (nothing attached, or an unclaimed pre-bind). */
function waitsForSender(a: StreamAnchor<unknown>): boolean {
  if (a.finished) return false;
  const bind = a.bind;
  if (a.feedKind === 'none') return true;
  return bind !== null && a._tailBind === bind && bind.peer === null && !bind.claimed && !bind.ended;
}
