/**
 * The mux of one node: a batcher per (peer, lane) for egress, an ingress table per (peer, lane),
 * the binds that OpenSlots claim, the credit sweep, doorbells, watchdogs, heartbeats and health
 * checks (docs/protocol.md §8, §10). One sweep timer per node, one doorbell timer per dirty table: never
 * a timer per stream.
 *
 * Longer than the other files: it is the hub every part reports to (BatcherHost, IngressHost,
 * PeerWindowHost) and the one timer's state machine (sweep, watchdog windows, heartbeats, health
 * checks, peer loss) over the same per-peer maps. What stands alone is beside it: heartbeats.ts,
 * lane-load.ts, deadline-queue.ts, rendezvous.ts, peer-window.ts, peer-egress.ts.
 */
import { ByteBudget } from '../credit/byte-budget.ts';
import { ReceiveWindow } from '../credit/peer-window.ts';
import type { LanemuxError } from '../errors.ts';
import { LanemuxError as LanemuxErrorClass } from '../errors.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import { DropReason } from '../metrics/mux-metrics.ts';
import { FrameKind } from '../wire/frame.ts';
import type { Messenger, PeerGoneEvent, PeerId } from '../messenger/types.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { randomU64 } from '../runtime/runtime.ts';
import { CloseReason, MAX_LANES, MPSC_ANCHOR_BIT } from '../wire/constants.ts';
import { BatchReader } from '../wire/decoder.ts';
import { laneForKey } from '../wire/lane-hash.ts';
import { Batcher } from './batcher.ts';
import type { BatchSink, BatcherHost } from './batcher.ts';
import { Bind } from './bind.ts';
import { DeadlineQueue } from './deadline-queue.ts';
import { HEARTBEAT_FLOOR_MS, HeartbeatSchedule, type HeartbeatSender } from './heartbeats.ts';
import { LaneLoad, leastLoaded } from './lane-load.ts';
import { PeerEgress } from './peer-egress.ts';
import type { BindEnd, BindOwner } from './bind.ts';
import type { ResolvedMuxConfig } from './config.ts';
import type { EgressSlot, EgressSlotOwner } from './egress-slot.ts';
import { MuxError } from './errors.ts';
import { IngressTable, releaseUnkept } from './ingress.ts';
import {
  PeerWindowIn,
  WINDOW_HANDLER,
  WINDOW_UPDATE_BYTES,
  decodeWindowUpdate,
  encodeWindowUpdate,
} from './peer-window.ts';
import type { PeerWindowHost } from './peer-window.ts';
import { PULL_HANDLER, STAGE_HANDLER, StageIn, StageOut } from './rendezvous.ts';
import type { Admission } from '../messenger/types.ts';
import type { IngressHost, IngressSlot } from './ingress.ts';

/** A bind waits for its accept deadline until an OpenSlot claims it or it ends. */
const bindWaiting = (b: Bind): boolean => !b.claimed && !b.ended;

/** Options of {@link Mux}. */
export interface MuxOptions {
  readonly config: ResolvedMuxConfig;
  readonly metrics: MuxMetrics;
  readonly runtime: Runtime;
  readonly messenger: Messenger;
  /**
   * The receive window this node advertised in its HELLO, in bytes (the node's `peerByteBudget`).
   * Undefined: none was advertised, so peers do not limit what they send here and this mux neither
   * enforces nor reports, nor limits its own senders (peers only report to a peer that advertised).
   * Defaults to `messenger.self.window`.
   */
  readonly receiveWindow?: number | undefined;
}

const CONNECT_ATTEMPTS = 3;

/** Session ids key the bind map by their low 52 bits (a Number); a lookup checks the exact pair. */
const SESSION_KEY_MASK = (1n << 52n) - 1n;
const sessionKey = (session: bigint): number => Number(session & SESSION_KEY_MASK);

/** The mux of one node. */
export class Mux implements BatcherHost, IngressHost, PeerWindowHost {
  readonly config: ResolvedMuxConfig;
  readonly metrics: MuxMetrics;
  readonly runtime: Runtime;
  readonly sink: BatchSink;
  readonly #messenger: Messenger;
  #batchers = new Map<PeerId, Array<Batcher | undefined>>();
  #tables = new Map<PeerId, Array<IngressTable | undefined>>();
  /** Flat lists for the sweep: index loops, so a tick on an idle node allocates nothing. */
  #batcherList: Batcher[] = [];
  #tableList: IngressTable[] = [];
  #budgets = new Map<PeerId, ByteBudget>();
  #egress = new Map<PeerId, PeerEgress>();
  /**
   * Live binds by the low 52 bits of their session id (a Number key is cheaper than a string built
   * from two bigints). Sessions are random u64s, drawn again on a key collision, so a key names at
   * most one live bind; a lookup checks the exact pair.
   */
  #binds = new Map<number, Bind>();
  /** The window this node advertised (undefined: none). */
  readonly #receiveWindow: number | undefined;
  /** Receive accounts by peer, for the peer's current link. */
  #windowsIn = new Map<PeerId, PeerWindowIn>();
  /** The update body, reused (the messenger copies what it is given). */
  readonly #windowBody = new Uint8Array(WINDOW_UPDATE_BYTES);
  /** When each peer was last pinged because the window kept its silent slots from counting as dead. */
  #windowPings = new Map<PeerId, number>();
  /** Accept deadlines: one FIFO per constant window (attach binds, pre-binds). */
  #attachDeadlines = new DeadlineQueue<Bind>(bindWaiting);
  #prebindDeadlines = new DeadlineQueue<Bind>(bindWaiting);
  /** Lane load per sender (binds answered + live slots) and per node (every bind and live slot). */
  readonly #load = new LaneLoad();
  #epoch = 0n;
  #reader = new BatchReader();
  /** The node's one timer: armed for the next sweep or the earliest heartbeat due, whichever is first. */
  #sweepTimer: TimerHandle | null = null;
  #timerAt = Number.NaN;
  /** When the next sweep runs (NaN: none scheduled). */
  #sweepDue = Number.NaN;
  #lastWatchdog = 0;
  #heartbeats = new HeartbeatSchedule();
  /**
   * Attach binds the consumer cancelled before their OpenSlot arrived, by session key, until that
   * OpenSlot (answered with the cancel, docs/protocol.md §10.3) or their accept deadline.
   */
  #cancelledAttaches = new Map<number, Bind>();
  /** Scratch list of the watchdog's silent attach binds (reused). */
  #silentBinds: Bind[] = [];
  #closed = false;
  #unsubscribe: Array<() => void> = [];
  readonly #stageOut: StageOut;
  readonly #stageIn: StageIn;

  constructor(options: MuxOptions) {
    this.config = options.config;
    this.metrics = options.metrics;
    this.runtime = options.runtime;
    this.#messenger = options.messenger;
    const messenger = options.messenger;
    this.#receiveWindow = options.receiveWindow ?? messenger.self.window;
    this.sink = {
      // The link epoch pins a batch to the connection it was encoded for: after a reconnect the
      // messenger refuses it (epoch death) rather than sending it on the new connection.
      sendBatch: (peer, lane, payload, epoch) =>
        messenger.sendBatch(peer, lane, payload, epoch === undefined ? undefined : { epoch }),
      maxMessageSize: (peer) => messenger.maxMessageSize(peer),
      linkEpoch: (peer) => messenger.peer(peer)?.epoch,
    };
    // Rendezvous: staged singletons (sender) and their pulls (receiver).
    const metrics = this.metrics;
    this.#stageOut = new StageOut(
      {
        now: () => this.runtime.now(),
        send: (peer, lane, name, payload) => messenger.send(peer, lane, name, payload),
        maxMessageSize: (peer) => messenger.maxMessageSize(peer),
        bytesChanged: (delta) => {
          metrics.stagedOutBytes += delta;
        },
      },
      Math.max(this.config.peerByteBudget, this.config.stagedPayloadMax),
      this.config.acceptWindow,
    );
    this.#stageIn = new StageIn(
      {
        request: (peer, name, body) => messenger.request(peer, name, body),
        maxMessageSize: (peer) => messenger.maxMessageSize(peer),
        deliver: (peer, lane, payload) => this.#ingress(peer, lane, payload, true),
        refuse: (peer, lane, epoch, slot, session, message) =>
          this.#refuseStaged(peer, lane, epoch, slot, session, message),
        // A transfer that will never be applied: the sender charged its window for it.
        unkept: (peer, size) => this.#windowIn(peer).dropped(size),
        pendingChanged: (peer, lane, epoch, slot, session, delta) =>
          this.#tables.get(peer)?.[lane]?.stagedPendingChanged(epoch, slot, session, delta),
        bytesChanged: (delta) => {
          metrics.stagedInBytes += delta;
        },
      },
      this.config.stagedPayloadMax,
    );
    messenger.on(STAGE_HANDLER, (from, lane, payload) => this.#stageIn.onDescriptor(from, lane, payload));
    messenger.on(WINDOW_HANDLER, (from, _lane, payload) => this.#onWindowUpdate(from, payload));
    messenger.handle(PULL_HANDLER, (from, body) => this.#stageOut.onPull(from, body), { signal: false });
    // Every node registers all 16 lane handlers, whatever its own lane count.
    for (let lane = 0; lane < MAX_LANES; lane++) {
      messenger.registerBatchHandler(lane, (from, _lane, payload) => this.#ingress(from, lane, payload));
    }
    this.#unsubscribe.push(messenger.onPeerGone((ev) => this.#peerGone(ev)));
    this.#lastWatchdog = this.runtime.now();
    this.#armSweep();
  }

  // ───────────────────────── epochs, batchers, tables ─────────────────────────

  peerAlive(peer: PeerId): boolean {
    return this.#messenger.peer(peer) !== undefined;
  }

  nextEpoch(): bigint {
    this.#epoch += 1n;
    return this.#epoch;
  }

  /** Lanes toward a peer: min(transport lanes, 16), at least 1. */
  lanes(peer: PeerId): number {
    return Math.max(1, Math.min(this.#messenger.lanes(peer), MAX_LANES));
  }

  /** The batcher for (peer, lane), created on first use. */
  batcherFor(peer: PeerId, lane: number): Batcher {
    let arr = this.#batchers.get(peer);
    if (!arr) {
      arr = [];
      this.#batchers.set(peer, arr);
    }
    let b = arr[lane];
    if (b === undefined || b.retired) {
      b = new Batcher(this, peer, lane);
      arr[lane] = b;
      this.#batcherList.push(b);
      this.#armSweep();
    }
    return b;
  }

  #existingBatcher(peer: PeerId, lane: number): Batcher | undefined {
    const b = this.#batchers.get(peer)?.[lane];
    return b !== undefined && !b.retired ? b : undefined;
  }

  #table(peer: PeerId, lane: number): IngressTable {
    let arr = this.#tables.get(peer);
    if (!arr) {
      arr = [];
      this.#tables.set(peer, arr);
    }
    let t = arr[lane];
    if (t === undefined) {
      let budget = this.#budgets.get(peer);
      if (!budget) {
        budget = new ByteBudget(this.config.peerByteBudget);
        this.#budgets.set(peer, budget);
      }
      t = new IngressTable(this, peer, lane, budget);
      t.window = this.#windowIn(peer);
      arr[lane] = t;
      this.#tableList.push(t);
      this.#armSweep();
    }
    return t;
  }

  /** A batch from its lane, or (`staged`) an assembled rendezvous singleton. */
  #ingress(from: PeerId, lane: number, payload: Uint8Array, staged = false): void {
    if (this.#closed) return;
    // Per batch, not per record: the account follows the peer's current link.
    const window = this.#windowIn(from);
    const r = this.#reader;
    if (!r.reset(payload)) {
      this.metrics.decodeErrors++;
      if (staged) window.dropped(payload.byteLength);
      return;
    }
    if (r.lane !== lane) {
      // Dropped before any table exists: its slot ids belong to another batcher (docs/protocol.md §10.2: SlotIds are per (peer, lane) and epoch).
      this.metrics.recordsDropped[DropReason.lane_mismatch]! += r.recordCount;
      releaseUnkept(r, window, staged ? payload.byteLength : 0);
      return;
    }
    this.#table(from, lane).handleBatch(r, staged ? payload.byteLength : 0);
    if (r.error) this.metrics.decodeErrors++;
  }

  // ───────────────────────── peer window ─────────────────────────

  /** The receive account of `peer`'s current link (a newer link replaces it). */
  #windowIn(peer: PeerId): PeerWindowIn {
    const info = this.#messenger.peer(peer);
    const epoch = info?.epoch ?? 0;
    let w = this.#windowsIn.get(peer);
    if (w !== undefined && w.epoch === epoch) return w;
    if (w !== undefined) w.dead = true;
    // Active only when both sides advertised a window: the peer then limits what it sends and
    // expects updates; an older peer (no window) keeps today's behaviour, counted but not limited.
    const active = this.#receiveWindow !== undefined && info?.window !== undefined;
    const size = this.#receiveWindow ?? Math.min(this.config.peerByteBudget, 0xffff_ffff);
    // A batch from the peer is at most its max message size toward us (the transport refuses more).
    w = new PeerWindowIn(
      this,
      peer,
      epoch,
      new ReceiveWindow(size, Math.max(0, this.#messenger.maxMessageSize(peer)), active),
    );
    this.#windowsIn.set(peer, w);
    for (const t of this.#tables.get(peer) ?? []) if (t !== undefined) t.window = w;
    return w;
  }

  /** Data-record bytes this node holds for `peer`'s current link (slot buffers, holds, unread records of retired slots). */
  receiverHeldBytes(peer: PeerId): number {
    return this.#windowsIn.get(peer)?.account.held ?? 0;
  }

  /** Bytes this node has in flight toward `peer` against its window. */
  senderInflightBytes(peer: PeerId): number {
    return this.#egress.get(peer)?.sendWindow.inflight ?? 0;
  }

  /** The window `peer` advertised, if both sides advertised one (else `Infinity`: no limit). */
  sendWindow(peer: PeerId): number {
    if (this.#receiveWindow === undefined) return Number.POSITIVE_INFINITY;
    return this.#messenger.peer(peer)?.window ?? Number.POSITIVE_INFINITY;
  }

  /** PeerWindowHost: send the update from a macrotask, so a burst of takes makes one update. */
  reportDue(w: PeerWindowIn): void {
    this.runtime.macrotask(() => this.#sendWindowUpdate(w));
  }

  #sendWindowUpdate(w: PeerWindowIn): void {
    w.pending = false;
    if (this.#closed || w.dead) return;
    const n = w.account.takeReport();
    if (n === 0) return;
    let admission: Admission;
    try {
      admission = this.#messenger.send(w.peer, 0, WINDOW_HANDLER, encodeWindowUpdate(n, this.#windowBody));
    } catch (e) {
      admission = Promise.reject(e);
    }
    this.metrics.windowUpdatesSent++;
    if (admission === true) return;
    admission.then(undefined, () => {
      this.metrics.windowUpdateSendFailed++;
      // Not sent: still owed. The sweep sends it again while this link lives.
      if (!w.dead && !this.#closed) w.account.unreported += n;
    });
  }

  /** A peer released bytes of its window: give them back to every lane toward it. */
  #onWindowUpdate(from: PeerId, payload: Uint8Array): void {
    if (this.#closed) return;
    const n = decodeWindowUpdate(payload);
    if (n < 0) {
      this.metrics.windowUpdateMalformed++;
      return;
    }
    this.metrics.windowUpdatesReceived++;
    const e = this.#egress.get(from);
    if (e === undefined) {
      this.metrics.windowOverRelease++;
      return;
    }
    e.sync(this.#messenger.peer(from)?.epoch ?? 0, this.sendWindow(from));
    // Releasing more than is in flight is the peer's error: counted, and clamped at 0.
    if (e.release(n) > 0) this.metrics.windowOverRelease++;
  }

  // ───────────────────────── rendezvous ─────────────────────────

  stage(peer: PeerId, lane: number, payload: Uint8Array, muxSlot: string): { id: number; admission: Admission } {
    this.#armSweep();
    return this.#stageOut.stage(peer, lane, payload, muxSlot);
  }

  peerEgress(peer: PeerId): PeerEgress {
    let e = this.#egress.get(peer);
    if (e === undefined) {
      e = new PeerEgress(this.config.peerByteBudget, this.metrics);
      this.#egress.set(peer, e);
    }
    return e;
  }

  stageRoom(peer: PeerId, size: number): boolean {
    return this.#stageOut.hasRoom(peer, size);
  }

  whenStageRoom(peer: PeerId, cb: () => void): void {
    this.#stageOut.whenRoom(peer, cb);
  }

  /** A staged transfer was refused or failed: end just its stream, and cancel its producer. */
  #refuseStaged(peer: PeerId, lane: number, epoch: bigint, slot: number, session: bigint, message: string): void {
    this.metrics.stagedRefused++;
    const table = this.#tables.get(peer)?.[lane];
    if (table === undefined || !table.refuseStaged(epoch, slot, session, message)) return;
    // LifecycleSlot names the session: a late CloseSlot could end a later stream that reuses the id.
    if (this.peerAlive(peer)) this.batcherFor(peer, lane).inbox.postReplyLifecycle(slot, session, true);
  }

  // ───────────────────────── IngressHost ─────────────────────────

  findBind(anchorId: bigint, sessionId: bigint, peer: PeerId): Bind | undefined {
    const b = this.#binds.get(sessionKey(sessionId));
    if (b === undefined || b.sessionId !== sessionId || b.anchorId !== anchorId || b.claimed || b.ended)
      return undefined;
    // An attach bind belongs to the peer it was answered to; a pre-bind to whoever holds its ticket.
    return b.peer === null || b.peer === peer ? b : undefined;
  }

  bindClaimed(bind: Bind): void {
    const slot = bind.slot;
    if (slot === null) return;
    // A pre-bind becomes a live slot of the peer that claimed it.
    if (bind.peer === null) this.#load.of(slot.peer)[bind.lane]! += 1;
    else this.#load.node[bind.lane]! += 1;
    // A stop or cancel made before the OpenSlot is delivered at claim (docs/protocol.md §10.3).
    if (bind.earlySignal > 0) this.signalLifecycle(bind, bind.earlySignal === 2);
  }

  bindEnded(bind: Bind, end: BindEnd): void {
    if (bind.ended) return;
    bind.ended = true;
    this.#binds.delete(sessionKey(bind.sessionId));
    if (bind.peer === null || bind.claimed) this.#load.node[bind.lane]! -= 1;
    const peer = bind.peer ?? bind.slot?.peer ?? null;
    if (peer !== null) {
      const load = this.#load.peek(peer);
      if (load) load[bind.lane]! -= 1;
    }
    bind.owner.onEnded(bind, end);
  }

  repostCredit(peer: PeerId, lane: number, credit: readonly number[]): void {
    // Credit a retiring batcher still held goes to its replacement (moot if the peer is gone).
    if (!this.peerAlive(peer)) return;
    for (let i = 0; i < credit.length; i += 2) {
      this.metrics.creditReposted += credit[i + 1]!;
      this.replyCredit(peer, lane, credit[i]!, credit[i + 1]!);
    }
  }

  replyCredit(peer: PeerId, lane: number, peerSlot: number, delta: number): void {
    if (!this.peerAlive(peer)) return; // the stream died with its peer: nothing is owed
    if (!this.batcherFor(peer, lane).inbox.postReplyCredit(peerSlot, delta)) {
      // The inbox closed under us (retiring batcher): re-resolve once.
      if (this.batcherFor(peer, lane).inbox.postReplyCredit(peerSlot, delta)) this.metrics.creditReposted += delta;
      else this.metrics.creditLost += delta;
    }
  }

  replyClose(peer: PeerId, lane: number, peerSlot: number, reason: number): void {
    if (!this.peerAlive(peer)) return;
    if (!this.batcherFor(peer, lane).inbox.postReplyClose(peerSlot, reason))
      this.batcherFor(peer, lane).inbox.postReplyClose(peerSlot, reason);
  }

  replyReject(peer: PeerId, lane: number, peerSlot: number, reason: number): void {
    if (!this.peerAlive(peer)) return;
    if (!this.batcherFor(peer, lane).inbox.postReject(peerSlot, reason)) this.metrics.controlRefused++;
  }

  ownedCredit(peer: PeerId, lane: number, slot: number, delta: number): void {
    const b = this.#existingBatcher(peer, lane);
    if (!b || !b.inbox.postCredit(slot, delta)) this.metrics.controlRefused++;
  }

  ownedClose(peer: PeerId, lane: number, slot: number, reason: number): void {
    const b = this.#existingBatcher(peer, lane);
    if (!b || !b.inbox.postClose(slot, reason)) this.metrics.controlRefused++;
  }

  ownedLifecycle(peer: PeerId, lane: number, slot: number, session: bigint, cancel: boolean): void {
    const b = this.#existingBatcher(peer, lane);
    if (!b || !b.inbox.postLifecycle(slot, session, cancel)) this.metrics.controlRefused++;
  }

  ringDoorbell(table: IngressTable): void {
    const floor = this.config.drainVisitFloor;
    const now = this.runtime.now();
    const visit = (): void => {
      if (this.#closed) return;
      // Clear the pending flag before walking, so a drain during the walk rings again.
      table.doorbellPending = false;
      table.lastVisit = this.runtime.now();
      this.metrics.drainVisits++;
      table.visitDirty();
    };
    const due = table.lastVisit + floor;
    if (floor === 0 || due <= now) this.runtime.macrotask(visit);
    else this.runtime.setTimer(visit, due - now);
  }

  // ───────────────────────── binds and lanes ─────────────────────────

  /** Choose a lane (docs/protocol.md §10.6): keyed → splitmix64(key) % lanes; else the least-loaded lane, ties low. */
  chooseLane(peer: PeerId | null, key: bigint | undefined): number {
    const lanes = peer === null ? Math.max(1, Math.min(this.#messenger.self.lanes, MAX_LANES)) : this.lanes(peer);
    if (lanes === 1) return 0;
    if (key !== undefined) return laneForKey(key, lanes);
    return leastLoaded(peer === null ? this.#load.node : this.#load.of(peer), lanes);
  }

  /**
   * Reserve (anchor, new session) for an OpenSlot to claim: answers an attach (`peer` known) or
   * mints a pre-bind (`peer` null). The bind owns the C+1 buffer the consumer reads.
   */
  bind(anchorId: bigint, owner: BindOwner, peer: PeerId | null, key?: bigint): Bind {
    const lane = this.chooseLane(peer, key);
    // The session is the claim's secret (a pre-bind's ticket is its only proof): random, nonzero,
    // and unique among live binds by its map key. A counter let an OpenSlot guess it.
    let session: bigint;
    do session = randomU64(this.runtime);
    while (session === 0n || this.#binds.has(sessionKey(session)) || this.#cancelledAttaches.has(sessionKey(session)));
    const window = peer === null ? this.config.prebindTimeout : this.config.acceptWindow;
    const bind = new Bind(
      anchorId,
      session,
      this.config.initialCredit,
      this.config.slotByteBudget,
      lane,
      peer,
      owner,
      this.runtime.now() + window,
    );
    this.#binds.set(sessionKey(session), bind);
    (peer === null ? this.#prebindDeadlines : this.#attachDeadlines).push(bind);
    // Node load (the pre-bind choice) is live slots from every peer plus unclaimed pre-binds (docs/protocol.md §10.6):
    // an answered attach counts there only once its OpenSlot claims it.
    if (peer === null) this.#load.node[lane]! += 1;
    else this.#load.of(peer)[lane]! += 1;
    this.#armSweep();
    return bind;
  }

  /** Give a bind back: unclaimed → released at once; claimed → the slot closes and the owner is told. */
  releaseBind(bind: Bind): void {
    if (bind.ended) return;
    const slot = bind.slot;
    if (slot !== null) slot.consumerGone();
    else {
      bind.buffer.close();
      this.bindEnded(bind, 'released');
      // An attach cancelled before its OpenSlot arrived: its producer is told the cancel when the
      // OpenSlot comes, not a bare UnknownSlot (docs/protocol.md §10.3).
      if (bind.earlySignal === 2 && bind.peer !== null && this.peerAlive(bind.peer)) {
        this.#cancelledAttaches.set(sessionKey(bind.sessionId), bind);
        this.#armSweep();
      }
    }
  }

  /** IngressHost: an OpenSlot for an attach its consumer already cancelled gets the cancel. */
  claimCancelled(anchorId: bigint, sessionId: bigint, peer: PeerId, lane: number, slot: number): boolean {
    const key = sessionKey(sessionId);
    const b = this.#cancelledAttaches.get(key);
    if (b === undefined || b.sessionId !== sessionId || b.anchorId !== anchorId || b.peer !== peer) return false;
    this.#cancelledAttaches.delete(key);
    // Both replies in one inbox, so they go as a pair in one batch. batcherFor never returns a
    // retired batcher, and only retirement closes an inbox.
    const inbox = this.batcherFor(peer, lane).inbox;
    inbox.postReplyClose(slot, CloseReason.UnknownSlot);
    inbox.postReplyLifecycle(slot, sessionId, true);
    return true;
  }

  /** Cancelled attaches whose accept deadline passed: a later OpenSlot is refused as unknown. */
  #expireCancelled(now: number): void {
    for (const [key, b] of this.#cancelledAttaches) if (b.deadline <= now) this.#cancelledAttaches.delete(key);
  }

  /** A consumer stop (cancel=false) or cancel for a claimed bind: a LifecycleSlot to the owner. */
  signalLifecycle(bind: Bind, cancel: boolean): void {
    const slot = bind.slot;
    if (slot === null) {
      bind.earlySignal = Math.max(bind.earlySignal, cancel ? 2 : 1);
      return;
    }
    this.batcherFor(slot.peer, slot.lane).inbox.postReplyLifecycle(slot.id, bind.sessionId, cancel);
  }

  // ───────────────────────── egress: opening slots ─────────────────────────

  /** Open a slot toward `peer` on `lane mod lanes(peer)`, retrying a retiring batcher (≤ 3 attempts). */
  async openSlot(
    peer: PeerId,
    lane: number,
    anchorId: bigint,
    sessionId: bigint,
    credit: number,
    owner: EgressSlotOwner,
    slotByteBudget?: number,
  ): Promise<EgressSlot> {
    const l = lane % this.lanes(peer);
    let last: unknown;
    for (let attempt = 0; attempt < CONNECT_ATTEMPTS; attempt++) {
      try {
        return await this.batcherFor(peer, l).openSlot(anchorId, sessionId, credit, owner, slotByteBudget);
      } catch (e) {
        last = e;
        if (!(e instanceof MuxError && e.code === 'ERR_CLOSED')) throw e;
      }
    }
    throw last;
  }

  /**
   * Register a producer for heartbeats at its consumer-advertised interval (at least
   * {@link HEARTBEAT_FLOOR_MS}); the first is due one interval from now. The node's one timer wakes
   * for the earliest heartbeat due, so a stream beats at its interval (up to a tenth early, when
   * that lets it share a wake), not on the sweep tick.
   */
  addHeartbeat(sender: HeartbeatSender): void {
    if (this.#closed) return;
    const due = this.#heartbeats.add(sender, this.runtime.now());
    if (!Number.isNaN(due) && (this.#sweepTimer === null || due < this.#timerAt)) this.#arm();
  }

  removeHeartbeat(sender: HeartbeatSender): void {
    this.#heartbeats.remove(sender);
  }

  /** `flushBatch()`: kick every batcher. Synchronous; never throws. */
  flushBatch(): void {
    for (const arr of this.#batchers.values()) {
      for (const b of arr) {
        if (b === undefined || b.retired) continue;
        try {
          b.kick();
        } catch {
          // A flush never throws to the caller; a refused write already became epoch death.
        }
      }
    }
  }

  // ───────────────────────── sweep ─────────────────────────

  /** Arm the node timer if it is not armed (the sweep is due one interval from now). */
  #armSweep(): void {
    if (this.#sweepTimer !== null || this.#closed) return;
    this.#arm();
  }

  /** (Re)arm the node timer for the next sweep or the earliest heartbeat, whichever is first. */
  #arm(): void {
    if (this.#closed) return;
    const now = this.runtime.now();
    if (Number.isNaN(this.#sweepDue)) this.#sweepDue = now + this.config.creditSweepInterval;
    const at = Math.min(this.#sweepDue, this.#heartbeats.next());
    if (this.#sweepTimer !== null) {
      if (this.#timerAt <= at) return;
      this.runtime.clearTimer(this.#sweepTimer);
    }
    this.#timerAt = at;
    this.#sweepTimer = this.runtime.setTimer(this.#onTimer, Math.max(0, at - now));
  }

  #onTimer = (): void => {
    this.#sweepTimer = null;
    this.#timerAt = Number.NaN;
    const now = this.runtime.now();
    const sweeping = now >= this.#sweepDue;
    try {
      if (sweeping) {
        this.#sweepDue = Number.NaN;
        this.sweep();
      } else this.#heartbeats.run(now);
    } finally {
      // One failing visit must not stop bind expiry, watchdogs and the backstop credit walk.
      if (!sweeping || this.#hasWork()) this.#arm();
    }
  };

  #hasWork(): boolean {
    return (
      this.#batcherList.length > 0 ||
      this.#tableList.length > 0 ||
      this.#binds.size > 0 ||
      this.#heartbeats.size > 0 ||
      this.#cancelledAttaches.size > 0 ||
      this.#stageOut.pending > 0
    );
  }

  /** Keep the sweep running while the node has work (called when work appears). */
  touch(): void {
    this.#armSweep();
  }

  /**
   * One sweep tick: reconcile every ingress slot, expire binds, run watchdog windows, send due
   * heartbeats, health-check peers with live slots, evict idle batchers. Skips each walk when it
   * has nothing to visit.
   */
  sweep(): void {
    if (this.#closed) return;
    const now = this.runtime.now();
    const tables = this.#tableList;
    for (let i = 0; i < tables.length; i++) if (tables[i]!.liveSlots > 0) tables[i]!.sweep();
    if (this.#attachDeadlines.pending || this.#prebindDeadlines.pending) this.#expireBinds(now);
    if (this.#cancelledAttaches.size > 0) this.#expireCancelled(now);
    // A window is the advertised interval, on the sweep tick: never shorter than a producer beats.
    if (now - this.#lastWatchdog >= Math.max(HEARTBEAT_FLOOR_MS, this.config.heartbeatInterval)) {
      this.#lastWatchdog = now;
      this.#watchdogWindow();
    }
    if (this.#heartbeats.size > 0) this.#heartbeats.run(now);
    // Backstop for records larger than a batch: released bytes the immediate conditions kept back.
    if (this.#windowsIn.size > 0) for (const w of this.#windowsIn.values()) w.flushIfPending();
    this.#stageOut.expire(now);
    this.#checkBatchers(now);
  }

  #expireBinds(now: number): void {
    const live = this.#binds.size;
    this.#attachDeadlines.expire(now, live, this.#expireBind);
    this.#prebindDeadlines.expire(now, live, this.#expireBind);
  }

  #expireBind = (b: Bind): void => {
    this.metrics.unclaimedBindReaped++;
    b.buffer.pushForced(FrameKind.Dropped, undefined);
    b.buffer.close();
    this.bindEnded(b, 'expired');
  };

  /** One heartbeat window of every stream watchdog (docs/protocol.md §10.8 "Watchdog"). */
  #watchdogWindow(): void {
    const limit = this.config.detectionMultiplier;
    const tables = this.#tableList;
    // A sender blocked by this node's window cannot heartbeat (its heartbeat would overtake its
    // queue), like one without credit: no window of a peer whose window may block it counts as dead.
    // Any record up to stagedPayloadMax may be the one blocked, so with the default (64 MiB > the
    // window) that is any peer this node holds or owes released bytes for.
    const largest = this.config.stagedPayloadMax;
    for (let i = 0; i < tables.length; i++) {
      {
        const t = tables[i]!;
        if (t.liveSlots === 0) continue;
        const w = this.#windowsIn.get(t.peer);
        const windowWait = w !== undefined && w.account.mayBlock(Math.max(largest, w.account.maxBatch));
        const fire: IngressSlot[] = [];
        let excused = false;
        for (const s of t.slots()) {
          const silent = s.arrivals === s.lastArrivals && !s.senderStarved;
          if (silent && windowWait) excused = true;
          s.lastArrivals = s.arrivals;
          s.deadWindows = silent && !windowWait ? s.deadWindows + 1 : 0;
          if (s.deadWindows >= limit) fire.push(s);
        }
        for (const s of fire) t.watchdogFire(s);
        // Excused slots prove nothing about their sender: the peer itself must answer a ping.
        if (excused) this.#windowHealthCheck(t.peer);
      }
    }
    // An answered attach whose OpenSlot never arrives is a silent stream like any other: the same
    // watchdog ends it after the same windows, not the accept window a minute later.
    if (this.#attachDeadlines.pending) {
      this.#attachDeadlines.forEachWaiting(this.#watchBind);
      const silent = this.#silentBinds;
      for (let i = 0; i < silent.length; i++) this.#dropSilentBind(silent[i]!);
      silent.length = 0;
    }
  }

  /** One watchdog window of an unclaimed attach bind: excused while its peer's window may block it. */
  #watchBind = (b: Bind): void => {
    const peer = b.peer!;
    const w = this.#windowsIn.get(peer);
    if (w !== undefined && w.account.mayBlock(Math.max(this.config.stagedPayloadMax, w.account.maxBatch))) {
      b.deadWindows = 0;
      this.#windowHealthCheck(peer);
      return;
    }
    if (++b.deadWindows >= this.config.detectionMultiplier) this.#silentBinds.push(b);
  };

  /** The watchdog ends an attach whose OpenSlot never came: Dropped to its consumer, counted as a firing. */
  #dropSilentBind(b: Bind): void {
    if (b.claimed || b.ended) return;
    if ((b.anchorId & MPSC_ANCHOR_BIT) === 0n) this.metrics.watchdogFirings++;
    b.buffer.clear();
    b.buffer.pushForced(FrameKind.Dropped, undefined);
    b.buffer.close();
    this.bindEnded(b, 'dropped');
  }

  /** A health check of a peer whose silent slots the window excused, at most once per health-check interval. */
  #windowHealthCheck(peer: PeerId): void {
    const now = this.runtime.now();
    if (now - (this.#windowPings.get(peer) ?? Number.NEGATIVE_INFINITY) < this.config.healthCheckInterval) return;
    this.#windowPings.set(peer, now);
    this.#healthCheck(peer);
  }

  #checkBatchers(now: number): void {
    const list = this.#batcherList;
    if (list.length === 0) return;
    const idleTicks = Math.max(1, Math.floor(this.config.batcherIdleTtl / this.config.creditSweepInterval));
    let healthPeer: PeerId | null = null;
    let removed = false;
    for (let i = 0; i < list.length; i++) {
      const b = list[i]!;
      if (b.retired) {
        removed = true;
        continue;
      }
      const { peer, lane } = b;
      if (b.liveSlots > 0 && now - b.lastHealthCheck >= this.config.healthCheckInterval) {
        // One health check per peer per interval, whatever its lane count.
        for (const x of this.#batchers.get(peer) ?? []) if (x !== undefined) x.lastHealthCheck = now;
        if (healthPeer !== peer) this.#healthCheck(peer);
        healthPeer = peer;
      }
      const ingressLive = this.#tables.get(peer)?.[lane]?.liveSlots ?? 0;
      if (b.idle && ingressLive === 0) {
        if (++b.idleTicks >= idleTicks) {
          const left = b.retire();
          removed = true;
          this.repostCredit(peer, lane, left.credit);
        }
      } else b.idleTicks = 0;
    }
    if (removed) this.#pruneBatchers();
  }

  /** Drop retired batchers from the registry and the sweep list. */
  #pruneBatchers(): void {
    this.#batcherList = this.#batcherList.filter((b) => !b.retired);
    for (const [peer, arr] of this.#batchers) {
      for (let lane = 0; lane < arr.length; lane++) if (arr[lane]?.retired) arr[lane] = undefined;
      if (arr.every((b) => b === undefined)) this.#batchers.delete(peer);
    }
  }

  #healthCheck(peer: PeerId): void {
    this.#messenger.ping(peer, { timeoutMs: this.config.healthCheckTimeout }).catch((cause: unknown) => {
      // Epoch death on every lane, then report the peer gone: the link is dropped, so its ingress
      // slots retire (Dropped) and the application sees the loss at once.
      this.#failPeer(
        peer,
        new MuxError('ERR_EPOCH_DEATH', `health check of ${peer} failed`, { cause, retryable: true }),
        false,
      );
      try {
        // The code travels in the GOAWAY: the peer learns it failed a health check (docs/protocol.md
        // docs/protocol.md §3.4), not that this node closed normally.
        this.#messenger.disconnect(
          peer,
          new LanemuxErrorClass('ERR_HEALTH_CHECK_FAILED', `health check of ${peer} failed`, {
            retryable: true,
            cause,
          }),
        );
      } catch {
        // Already gone.
      }
    });
  }

  // ───────────────────────── peer loss and teardown ─────────────────────────

  #peerGone(ev: PeerGoneEvent): void {
    const error = new MuxError('ERR_SENDER_DROPPED', `peer ${ev.peer} is gone: ${ev.reason}`, { retryable: true });
    const current = this.#messenger.peer(ev.peer);
    if (current !== undefined && current.epoch !== ev.epoch) {
      // An older link of a peer that is connected again: only batches pinned to that link are
      // lost. Its batchers die an epoch (their slots fail once); the new link's ingress stays.
      for (const b of this.#batchers.get(ev.peer) ?? []) {
        if (b !== undefined && !b.retired && b.linkEpoch !== undefined && b.linkEpoch !== current.epoch)
          b.epochDeath(error);
      }
      return;
    }
    this.#failPeer(ev.peer, error, true);
  }

  /** Epoch death on every lane toward `peer`; with `ingressToo`, retire its ingress tables (Dropped each). */
  #failPeer(peer: PeerId, error: LanemuxError, ingressToo: boolean): void {
    const arr = this.#batchers.get(peer);
    if (arr) for (const b of arr) if (b !== undefined && !b.retired && b.liveSlots > 0) b.epochDeath(error);
    if (!ingressToo) return;
    this.#stageOut.peerGone(peer);
    this.#stageIn.peerGone(peer);
    if (arr) {
      for (const b of arr) if (b !== undefined && !b.retired) b.retire(error);
      this.#pruneBatchers();
    }
    // Binds this peer was answered and never claimed: its link (and the batcher that would open
    // them) is gone, so they end now (Dropped), not an accept window later against a reconnected
    // peer's fresh lane load.
    for (const b of [...this.#binds.values()]) {
      if (b.peer !== peer || b.claimed) continue;
      b.buffer.pushForced(FrameKind.Dropped, undefined);
      b.buffer.close();
      this.bindEnded(b, 'dropped');
    }
    for (const [key, b] of this.#cancelledAttaches) if (b.peer === peer) this.#cancelledAttaches.delete(key);
    const tables = this.#tables.get(peer);
    if (tables) {
      for (const t of tables) if (t !== undefined) t.retireAll();
      this.#tables.delete(peer);
      this.#tableList = this.#tableList.filter((t) => t.peer !== peer);
      this.#budgets.delete(peer);
      this.#load.forget(peer);
    }
    this.#egress.get(peer)?.close();
    this.#egress.delete(peer);
    const w = this.#windowsIn.get(peer);
    if (w !== undefined) {
      w.dead = true;
      this.#windowsIn.delete(peer);
    }
    this.#windowPings.delete(peer);
  }

  /**
   * True while streams with `peer` are live or about to be: slots it sends us or we send it, or binds
   * answered to it. Such a link must not be closed as idle or evicted (the messenger asks).
   */
  busy(peer: PeerId): boolean {
    for (const b of this.#batchers.get(peer) ?? []) if (b !== undefined && b.liveSlots > 0) return true;
    for (const t of this.#tables.get(peer) ?? []) if (t !== undefined && t.liveSlots > 0) return true;
    const load = this.#load.peek(peer);
    if (load !== undefined) for (let i = 0; i < load.length; i++) if (load[i]! > 0) return true;
    return false;
  }

  /** Live slots on both sides (the `live_slots` gauge). */
  get liveSlots(): number {
    return this.metrics.liveSlots;
  }

  /** Stop sending, then retire every ingress slot (Dropped) and every bind. */
  close(): void {
    if (this.#closed) return;
    // Stop sending first: what producers handed over before close() is written, then retired.
    for (const b of this.#batcherList) if (!b.retired) b.kick();
    for (const arr of this.#batchers.values()) for (const b of arr) if (b !== undefined && !b.retired) b.retire();
    this.#batchers.clear();
    this.#batcherList = [];
    for (const t of this.#tableList) t.retireAll();
    this.#tables.clear();
    this.#tableList = [];
    for (const b of [...this.#binds.values()]) {
      b.buffer.pushForced(FrameKind.Dropped, undefined);
      b.buffer.close();
      this.bindEnded(b, 'dropped');
    }
    for (const w of this.#windowsIn.values()) w.dead = true;
    this.#windowsIn.clear();
    for (const e of this.#egress.values()) e.close();
    // Staged transfers die with the node: nothing would expire them once the sweep stops.
    this.#stageOut.close();
    this.#stageIn.close();
    this.#closed = true;
    if (this.#sweepTimer !== null) this.runtime.clearTimer(this.#sweepTimer);
    this.#sweepTimer = null;
    for (const u of this.#unsubscribe) u();
    this.#heartbeats.clear();
    this.#cancelledAttaches.clear();
  }
}
