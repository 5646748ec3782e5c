/**
 * The binds a node's mux holds (docs/protocol.md §8, §10.2, §10.6): attach binds answered to a
 * peer and pre-binds minted for a ticket, each waiting for the OpenSlot that claims it until its
 * accept deadline; attaches the consumer cancelled before their OpenSlot came, kept to answer that
 * OpenSlot with the cancel (§10.3); and the lane load the binds and their slots make. Per stream,
 * never per record: the mux's sweep expires the deadlines, its watchdog walks the waiting attaches.
 */
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { PeerId } from '../messenger/types.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { randomU64 } from '../runtime/runtime.ts';
import { FrameKind } from '../wire/frame.ts';
import { Bind, type BindEnd, type BindOwner } from './bind.ts';
import type { ResolvedMuxConfig } from './config.ts';
import { DeadlineQueue } from './deadline-queue.ts';
import { LaneLoad } from './lane-load.ts';

/** A bind waits for its accept deadline until an OpenSlot claims it or it ends. */
const bindWaiting = (b: Bind): boolean => !b.claimed && !b.ended;

/** Session ids key the bind map by their low 52 bits (a Number); a lookup checks the exact pair. */
const SESSION_KEY_MASK = (1n << 52n) - 1n;
const sessionKey = (session: bigint): number => Number(session & SESSION_KEY_MASK);

/** Every live bind of a node, by session. */
export class BindRegistry {
  /** Lane load per sender (binds answered + live slots) and per node (every bind and live slot). */
  readonly load = new LaneLoad();
  readonly #config: ResolvedMuxConfig;
  readonly #metrics: MuxMetrics;
  readonly #runtime: Runtime;
  /**
   * Live binds by the low 52 bits of their session id (a Number key is cheaper than a string built
   * from two bigints). Sessions are random u64s, drawn again on a key collision, so a key names at
   * most one live bind; a lookup checks the exact pair.
   */
  readonly #binds = new Map<number, Bind>();
  /** Accept deadlines: one FIFO per constant window (attach binds, pre-binds). */
  readonly #attachDeadlines = new DeadlineQueue<Bind>(bindWaiting);
  readonly #prebindDeadlines = new DeadlineQueue<Bind>(bindWaiting);
  /**
   * Attach binds the consumer cancelled before their OpenSlot arrived, by session key, until that
   * OpenSlot (answered with the cancel, docs/protocol.md §10.3) or their accept deadline.
   */
  readonly #cancelled = new Map<number, Bind>();
  #expire = (b: Bind): void => {
    this.#metrics.unclaimedBindReaped++;
    this.#drop(b, 'expired');
  };

  constructor(config: ResolvedMuxConfig, metrics: MuxMetrics, runtime: Runtime) {
    this.#config = config;
    this.#metrics = metrics;
    this.#runtime = runtime;
  }

  /** True while a bind or a cancelled attach is held (the sweep has work). */
  /** Binds held now: waiting for or claimed by an OpenSlot, and cancelled ones kept until their deadline. */
  get size(): number {
    return this.#binds.size + this.#cancelled.size;
  }

  get busy(): boolean {
    return this.#binds.size > 0 || this.#cancelled.size > 0;
  }

  /** True while some attach bind may still wait for its OpenSlot (the watchdog walks them). */
  get attachesWaiting(): boolean {
    return this.#attachDeadlines.pending;
  }

  /**
   * Reserve (anchor, new session) on `lane` for an OpenSlot to claim: an attach answered to `peer`,
   * or (`peer` null) a pre-bind. The bind owns the C+1 buffer the consumer reads.
   */
  add(anchorId: bigint, owner: BindOwner, peer: PeerId | null, lane: number, limit?: number): Bind {
    // The session is the claim's secret (a pre-bind's ticket is its only proof): random, nonzero,
    // and unique among live binds by its map key. A counter let an OpenSlot guess it.
    let session: bigint;
    do session = randomU64(this.#runtime);
    while (session === 0n || this.#binds.has(sessionKey(session)) || this.#cancelled.has(sessionKey(session)));
    const config = this.#config;
    const window = peer === null ? config.prebindTimeout : config.acceptWindow;
    const bind = new Bind(
      anchorId,
      session,
      limit ?? config.initialCredit,
      config.slotByteBudget,
      lane,
      peer,
      owner,
      this.#runtime.now() + window,
    );
    this.#binds.set(sessionKey(session), bind);
    (peer === null ? this.#prebindDeadlines : this.#attachDeadlines).push(bind);
    // Node load (the pre-bind choice) is live slots from every peer plus unclaimed pre-binds (docs/protocol.md §10.6):
    // an answered attach counts there only once its OpenSlot claims it.
    if (peer === null) this.load.node[lane]! += 1;
    else this.load.of(peer)[lane]! += 1;
    return bind;
  }

  /**
   * An unclaimed bind for (anchor, session) that `peer` may claim, if any: an attach bind only from
   * the peer it was answered to, a pre-bind from any peer holding its (secret) session.
   */
  find(anchorId: bigint, sessionId: bigint, peer: PeerId): Bind | undefined {
    const b = this.#binds.get(sessionKey(sessionId));
    if (b === undefined || b.sessionId !== sessionId || b.anchorId !== anchorId || b.claimed || b.ended)
      return undefined;
    // An attach bind belongs to the peer it was answered to; a pre-bind to whoever holds its ticket.
    return b.peer === null || b.peer === peer ? b : undefined;
  }

  /** The live bind of `session`, claimed or not. */
  get(sessionId: bigint): Bind | undefined {
    const b = this.#binds.get(sessionKey(sessionId));
    return b !== undefined && b.sessionId === sessionId && !b.ended ? b : undefined;
  }

  /** An OpenSlot claimed `bind`: its lane load becomes a live slot's. */
  claimed(bind: Bind): void {
    const slot = bind.slot;
    if (slot === null) return;
    // A pre-bind becomes a live slot of the peer that claimed it.
    if (bind.peer === null) this.load.of(slot.peer)[bind.lane]! += 1;
    else this.load.node[bind.lane]! += 1;
  }

  /** `bind` ended (once): it leaves the registry and its load, and its owner is told. */
  ended(bind: Bind, end: BindEnd): void {
    if (bind.ended) return;
    bind.ended = true;
    this.#binds.delete(sessionKey(bind.sessionId));
    // No bind left, so none waits: the deadline queues let go of every finished stream now, not at
    // a later compaction (they hold the binds, and through them the anchors and their buffers).
    if (this.#binds.size === 0) {
      this.#attachDeadlines.clear();
      this.#prebindDeadlines.clear();
    }
    if (bind.peer === null || bind.claimed) this.load.node[bind.lane]! -= 1;
    const peer = bind.peer ?? bind.slot?.peer ?? null;
    if (peer !== null) {
      const load = this.load.peek(peer);
      if (load) load[bind.lane]! -= 1;
    }
    bind.owner.onEnded(bind, end);
  }

  /** End an unclaimed bind with `Dropped` in its buffer (`clear`: unread frames discarded first). */
  drop(b: Bind, clear = false): void {
    if (clear) b.buffer.clear();
    this.#drop(b, 'dropped');
  }

  #drop(b: Bind, end: BindEnd): void {
    b.buffer.pushForced(FrameKind.Dropped, undefined);
    b.buffer.close();
    this.ended(b, end);
  }

  /** A released attach the consumer cancelled before its OpenSlot: keep it to answer that OpenSlot. */
  cancelled(bind: Bind): void {
    this.#cancelled.set(sessionKey(bind.sessionId), bind);
  }

  /** True (once) if (anchor, session) from `peer` names an attach its consumer cancelled. */
  takeCancelled(anchorId: bigint, sessionId: bigint, peer: PeerId): boolean {
    const key = sessionKey(sessionId);
    const b = this.#cancelled.get(key);
    if (b === undefined || b.sessionId !== sessionId || b.anchorId !== anchorId || b.peer !== peer) return false;
    this.#cancelled.delete(key);
    return true;
  }

  /**
   * The sweep: unclaimed binds whose accept deadline passed end (`expired`); cancelled attaches
   * past theirs are forgotten, so a later OpenSlot is refused as unknown.
   */
  expire(now: number): void {
    if (this.#attachDeadlines.pending || this.#prebindDeadlines.pending) {
      const live = this.#binds.size;
      this.#attachDeadlines.expire(now, live, this.#expire);
      this.#prebindDeadlines.expire(now, live, this.#expire);
    }
    if (this.#cancelled.size > 0)
      for (const [key, b] of this.#cancelled) if (b.deadline <= now) this.#cancelled.delete(key);
  }

  /** Call `fn` on every attach bind still waiting for its OpenSlot, oldest first. */
  forEachWaitingAttach(fn: (b: Bind) => void): void {
    this.#attachDeadlines.forEachWaiting(fn);
  }

  /**
   * `peer` is gone: binds answered to it and never claimed end now (Dropped), not an accept window
   * later against a reconnected peer's fresh lane load; its cancelled attaches are forgotten.
   */
  peerGone(peer: PeerId, linkLost = false): void {
    for (const b of [...this.#binds.values()]) {
      if (b.peer !== peer || b.claimed) continue;
      // An answered attach kept for a resume (docs/protocol.md §8.3) ends suspended, not Dropped.
      if (linkLost && b.owner.suspend?.(b) === true) {
        b.buffer.close();
        this.ended(b, 'suspended');
      } else this.#drop(b, 'dropped');
    }
    for (const [key, b] of this.#cancelled) if (b.peer === peer) this.#cancelled.delete(key);
  }

  /** The node closes: every bind ends (Dropped). */
  dropAll(): void {
    for (const b of [...this.#binds.values()]) this.#drop(b, 'dropped');
  }

  /** Forget the cancelled attaches (the node closed). */
  clearCancelled(): void {
    this.#cancelled.clear();
  }
}
