/**
 * A node's resumable producer streams (docs/protocol.md §8.3): whether resume applies toward
 * a peer (asked of the node's {@link ResumePeers}), the streams waiting for their peer to link again
 * (woken when it does), the streams lingering after their terminal (their rings kept
 * for the resume window, in one FIFO with one timer), and the node-wide replay budget.
 */
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { Messenger, PeerId, PeerInfo } from '../messenger/types.ts';
import type { ResumePeers } from './resume-peers.ts';
import type { EgressSlot, EgressSlotOwner } from '../mux/egress-slot.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import type { ResumeFailure } from './errors.ts';
import { closedOnPurpose } from '../mux/errors.ts';
import type { LanePing } from '../mux/replay-log.ts';
import { ReplayBudget } from './replay-ring.ts';
import type { ResumeAnswer, ResumeHost, ResumeLink } from './resume-link.ts';
import type { ResolvedResume } from './resume-options.ts';
import { randomHex } from '../runtime/runtime.ts';
import { TerminalConfirmations } from './terminal-confirm.ts';

/** How the producer side makes a resume attach and opens its slot. */
export interface ResumeTransport {
  reattach: ResumeHost['reattach'];
  openSlot(link: ResumeLink, answer: ResumeAnswer, owner: EgressSlotOwner): Promise<EgressSlot>;
}

export class ResumeRegistry implements ResumeHost {
  readonly windowMs: number;
  readonly maxReplayBytesPerStream: number;
  readonly budget: ReplayBudget;
  /** A PING on a lane, for terminal confirmations and the lanes' replay logs (docs/protocol.md §8.3). */
  readonly lanePing: LanePing;
  /** Per-stream history for re-attaching (docs/protocol.md §8.4), or null when off. */
  readonly history: ResolvedResume['history'];
  /** How long a stream keeps its ring after its terminal: the resume window, or the history's keep time. */
  readonly lingerMs: number;
  /** Re-attachable streams by resume token. */
  readonly #byToken = new Map<string, ResumeLink>();
  readonly #messenger: Messenger;
  readonly #runtime: Runtime;
  readonly #metrics: MuxMetrics;
  readonly #transport: ResumeTransport;
  readonly #waiting = new Map<PeerId, Set<ResumeLink>>();
  /** Lingering streams in the order they started to (the window is one constant): link → deadline. */
  readonly #lingering = new Map<ResumeLink, number>();
  #lingerTimer: TimerHandle | null = null;
  /** Lingering streams whose terminal a PING on its lane will confirm. */
  readonly #confirmations: TerminalConfirmations;
  readonly #unsubscribe: Array<() => void> = [];
  readonly #peers: ResumePeers;

  constructor(
    options: ResolvedResume,
    peers: ResumePeers,
    messenger: Messenger,
    runtime: Runtime,
    metrics: MuxMetrics,
    transport: ResumeTransport,
  ) {
    this.windowMs = options.windowMs;
    this.maxReplayBytesPerStream = options.maxReplayBytesPerStream;
    this.budget = new ReplayBudget(options.maxReplayBytes);
    this.history = options.history;
    this.lingerMs = Math.max(options.windowMs, options.history?.keepMs ?? 0);
    this.lanePing = (peer, lane) => {
      const info = messenger.peer(peer);
      return info === undefined ? undefined : { epoch: info.epoch, answer: messenger.ping(peer, { lane }) };
    };
    this.#confirmations = new TerminalConfirmations(this.lanePing);
    this.budget.evict = () => this.#evictOldestFinished();
    metrics.replayBytes = () => this.budget.used;
    this.#messenger = messenger;
    this.#runtime = runtime;
    this.#metrics = metrics;
    this.#transport = transport;
    this.#peers = peers;
    // The peers table updates itself first, then wakes this registry's waiting streams.
    peers.onPeerUp = (info) => this.#peerUp(info);
    this.#unsubscribe.push(
      messenger.onPeerGone((ev) => {
        // A peer that closed on purpose had every batch sent before its GOAWAY.
        if (closedOnPurpose(ev.error)) return;
        for (const link of [...this.#lingering.keys()]) if (link.peer === ev.peer) link.linkGone(ev.epoch);
      }),
    );
  }

  /** True while a stream waits for its peer to link again. */
  get waiting(): boolean {
    return this.#waiting.size > 0;
  }

  /** True when streams toward `peer` resume: both this node's and the peer's HELLO list the resume key. */
  negotiated(peer: PeerId): boolean {
    return this.#peers.negotiated(peer);
  }

  #peerUp(info: PeerInfo): void {
    const set = this.#waiting.get(info.id);
    if (set === undefined) return;
    for (const link of [...set]) link.peerUp(info);
  }

  // ───────────── ResumeHost ─────────────

  setTimer(fn: () => void, ms: number): unknown {
    return this.#runtime.setTimer(fn, ms);
  }

  clearTimer(t: unknown): void {
    this.#runtime.clearTimer(t as TimerHandle);
  }

  peerNow(peer: PeerId): PeerInfo | undefined {
    return this.#messenger.peer(peer);
  }

  watch(link: ResumeLink, on: boolean): void {
    let set = this.#waiting.get(link.peer);
    if (on) {
      if (set === undefined) this.#waiting.set(link.peer, (set = new Set()));
      set.add(link);
    } else if (set !== undefined && set.delete(link) && set.size === 0) this.#waiting.delete(link.peer);
  }

  linger(link: ResumeLink, on: boolean): void {
    this.#lingering.delete(link);
    if (on) {
      this.#lingering.set(link, this.#runtime.now() + this.lingerMs);
      this.#lingerTimer ??= this.#runtime.setTimer(this.#expireLingering, this.lingerMs);
    }
    this.#metrics.lingeringStreams = this.#lingering.size;
  }

  /** Streams lingering after their terminal (kept for the resume window or until confirmed). */
  get lingering(): number {
    return this.#lingering.size;
  }

  confirmTerminal(link: ResumeLink, lane: number, epoch: number, gen: number): void {
    this.#confirmations.add(link.peer, lane, epoch, gen, link);
  }

  /**
   * The node-wide replay budget is full: the stream that finished first and holds a ring lets it go.
   * A finished stream whose records are still in its lane's replay log holds none: ending it would
   * free nothing (the log drops its own oldest records instead).
   */
  #evictOldestFinished(): boolean {
    for (const link of this.#lingering.keys()) {
      if (link.ringBytes === 0) continue;
      this.#lingering.delete(link);
      this.#metrics.lingeringStreams = this.#lingering.size;
      link.lingerDone();
      return true;
    }
    return false;
  }

  /** A resume token for `link` (128 random bits, hex): it names that stream only, until it ends. */
  issueToken(link: ResumeLink): string {
    let token: string;
    do token = randomHex(this.#runtime, 16);
    while (this.#byToken.has(token));
    this.#byToken.set(token, link);
    return token;
  }

  /** The re-attachable stream a token names, if it is still kept. */
  byToken(token: string): ResumeLink | undefined {
    return this.#byToken.get(token);
  }

  forgetToken(token: string): void {
    this.#byToken.delete(token);
  }

  readonly #expireLingering = (): void => {
    this.#lingerTimer = null;
    const now = this.#runtime.now();
    for (const [link, until] of this.#lingering) {
      if (until > now) {
        this.#lingerTimer = this.#runtime.setTimer(this.#expireLingering, until - now);
        return;
      }
      this.#lingering.delete(link);
      this.#metrics.lingeringStreams = this.#lingering.size;
      link.lingerDone();
    }
  };

  reattach(link: ResumeLink, session: bigint, sent: number, from: number): ReturnType<ResumeHost['reattach']> {
    return this.#transport.reattach(link, session, sent, from);
  }

  openSlot(link: ResumeLink, answer: ResumeAnswer, owner: EgressSlotOwner): Promise<EgressSlot> {
    return this.#transport.openSlot(link, answer, owner);
  }

  resumed(): void {
    this.#metrics.resumedStreams++;
  }

  failed(reason: ResumeFailure): void {
    this.#metrics.resumeFailed(reason);
  }

  /** The node closes: every waiting stream fails, every lingering one is done. */
  close(): void {
    for (const u of this.#unsubscribe) u();
    this.#confirmations.close();
    if (this.#lingerTimer !== null) this.#runtime.clearTimer(this.#lingerTimer);
    this.#lingerTimer = null;
    for (const set of [...this.#waiting.values()]) for (const link of [...set]) link.close();
    for (const link of [...this.#lingering.keys()]) link.close();
    this.#waiting.clear();
    this.#lingering.clear();
    this.#metrics.lingeringStreams = 0;
  }
}
