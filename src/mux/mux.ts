/**
 * The mux of one node: a lane writer per (peer, lane) for egress (a batcher on a node; on a client,
 * which opens no slot, a reply lane: lane-writer.ts, producer-parts.ts), an ingress table per (peer, lane),
 * and the hub every part reports to (BatcherHost, IngressHost): it wires them to the messenger,
 * routes replies and owned control between a lane's table and its batcher, walks them on the
 * sweep tick, and fails them when a peer is lost (docs/protocol.md §8, §10). One sweep timer per
 * node, one doorbell timer per dirty table: never a timer per stream. The parts with state of
 * their own are beside it: the batchers and tables by peer (peer-lanes.ts), the binds and their
 * lane load (bind-registry.ts), the node's one timer and its heartbeats (node-timer.ts), the peer
 * windows both ways (peer-windows.ts), the stream watchdogs (watchdog.ts), rendezvous
 * (rendezvous.ts).
 */
import type { ReplayHooks } from './replay-log.ts';
import type { SenderLedger } from '../credit/sender-ledger.ts';
import type { LanemuxError } from '../errors.ts';
import { LanemuxError as LanemuxErrorClass } from '../errors.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import { DropReason } from '../metrics/mux-metrics.ts';
import type { Admission, Messenger, PeerGoneEvent, PeerId } from '../messenger/types.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { CloseReason, MAX_LANES, RecordType } from '../wire/constants.ts';
import { BatchReader } from '../wire/decoder.ts';
import { laneForKey } from '../wire/lane-hash.ts';
import type { Batcher } from './batcher.ts';
import { ReplyLane } from './reply-lane.ts';
import type { BatchSink, BatcherHost } from './batcher-host.ts';
import type { Bind, BindEnd, BindOwner } from './bind.ts';
import { BindRegistry } from './bind-registry.ts';
import type { ResolvedMuxConfig } from './config.ts';
import type { EgressSlot, EgressSlotOwner } from './egress-slot.ts';
import { MuxError, closedOnPurpose } from './errors.ts';
import type { HeartbeatSender } from './heartbeats.ts';
import type { IngressHost, IngressTable } from './ingress.ts';
import { releaseUnkept } from './ingress-window.ts';
import { leastLoaded } from './lane-load.ts';
import { NodeTimer } from './node-timer.ts';
import type { PeerEgress } from './peer-egress.ts';
import { WINDOW_HANDLER } from './peer-window.ts';
import { PeerLanes } from './peer-lanes.ts';
import { PeerWindows } from './peer-windows.ts';
import type { MuxProducerParts } from './producer-parts.ts';
import { PULL_HANDLER, STAGE_HANDLER, StageIn, type StageOut } from './rendezvous.ts';
import { Watchdog } from './watchdog.ts';

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
  /**
   * The producer-only parts (`MUX_PRODUCER_PARTS`: batchers, staging for pulls, heartbeats, the
   * egress toward each peer): a node's mux has them. Without them (a client's mux) it opens no slot,
   * writes its replies with reply lanes and answers no pull. Defaults to none.
   */
  readonly producer?: MuxProducerParts | undefined;
}

const CONNECT_ATTEMPTS = 3;

/** The mux of one node. */
export class Mux implements BatcherHost, IngressHost {
  readonly config: ResolvedMuxConfig;
  readonly metrics: MuxMetrics;
  readonly runtime: Runtime;
  readonly sink: BatchSink;
  /** The lanes' replay logs' budget and PING (replay-log.ts): set by the node when resume is on. */
  replay: ReplayHooks | null = null;
  readonly #messenger: Messenger;
  readonly #lanes: PeerLanes;
  readonly #binds: BindRegistry;
  readonly #windows: PeerWindows;
  readonly #timer: NodeTimer;
  readonly #watchdog: Watchdog;
  /** When each peer with live slots, either way, was last health-checked (deleted when it goes). */
  readonly #lastHealthChecks = new Map<PeerId, number>();
  #epoch = 0n;
  #reader = new BatchReader();
  #closed = false;
  #unsubscribe: Array<() => void> = [];
  /** The staged singletons this node offers (null on a mux that never produces). */
  readonly #stageOut: StageOut | null;
  readonly #stageIn: StageIn;

  constructor(options: MuxOptions) {
    this.config = options.config;
    this.metrics = options.metrics;
    this.runtime = options.runtime;
    this.#messenger = options.messenger;
    const messenger = options.messenger;
    this.#binds = new BindRegistry(this.config, this.metrics, this.runtime);
    this.#windows = new PeerWindows(
      messenger,
      this.runtime,
      this.metrics,
      this.config.peerByteBudget,
      options.receiveWindow ?? messenger.self.window,
      // A newer link's account: every table of the peer charges it from now on.
      (peer, w) => {
        for (const t of this.#lanes.tablesOf(peer)) if (t !== undefined) t.window = w;
      },
      options.producer?.peerEgress ?? null,
    );
    this.#lanes = new PeerLanes(
      this,
      this.config.peerByteBudget,
      (peer) => this.#windows.inFor(peer),
      () => this.#timer.armSweep(),
      // A node's lanes are written by batchers; a client's, which open no slot, by reply lanes.
      options.producer?.laneWriter ?? ((host, peer, lane) => new ReplyLane(host, peer, lane)),
    );
    this.#watchdog = new Watchdog(this.config, this.metrics, this.runtime, this.#windows, this.#binds, (peer) =>
      this.#healthCheck(peer),
    );
    this.#timer = new NodeTimer(
      this.runtime,
      this.config.creditSweepInterval,
      () => this.sweep(),
      () => this.#hasWork(),
      options.producer?.heartbeats() ?? null,
    );
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
    this.#stageOut =
      options.producer?.stageOut(
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
      ) ?? null;
    this.#stageIn = new StageIn(
      {
        request: (peer, name, body) => messenger.request(peer, name, body),
        maxMessageSize: (peer) => messenger.maxMessageSize(peer),
        deliver: (peer, lane, payload) => this.#ingress(peer, lane, payload, true),
        refuse: (peer, lane, epoch, slot, session, message) =>
          this.#refuseStaged(peer, lane, epoch, slot, session, message),
        // A transfer that will never be applied: the sender charged its window for it.
        unkept: (peer, size) => this.#windows.inFor(peer).dropped(size),
        pendingChanged: (peer, lane, epoch, slot, session, delta) =>
          this.#lanes.tableAt(peer, lane)?.stagedPendingChanged(epoch, slot, session, delta),
        bytesChanged: (delta) => {
          metrics.stagedInBytes += delta;
        },
      },
      this.config.stagedPayloadMax,
    );
    messenger.on(STAGE_HANDLER, (from, lane, payload) => this.#stageIn.onDescriptor(from, lane, payload));
    messenger.on(WINDOW_HANDLER, (from, _lane, payload) => this.#windows.onUpdate(from, payload));
    const stageOut = this.#stageOut;
    if (stageOut !== null)
      messenger.handle(PULL_HANDLER, (from, body) => stageOut.onPull(from, body), { signal: false });
    // Every node registers all 16 lane handlers, whatever its own lane count.
    for (let lane = 0; lane < MAX_LANES; lane++) {
      messenger.registerBatchHandler(lane, (from, _lane, payload) => this.#ingress(from, lane, payload));
    }
    this.#unsubscribe.push(messenger.onPeerGone((ev) => this.#peerGone(ev)));
    this.#timer.armSweep();
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
    // Only a mux with producer parts calls this (its lanes' writers are batchers).
    return this.#lanes.batcherFor(peer, lane) as Batcher;
  }

  /** A batch from its lane, or (`staged`) an assembled rendezvous singleton. */
  #ingress(from: PeerId, lane: number, payload: Uint8Array, staged = false): void {
    if (this.#closed) return;
    // Per batch, not per record: the account follows the peer's current link.
    const window = this.#windows.inFor(from);
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
    this.#lanes.table(from, lane).handleBatch(r, staged ? payload.byteLength : 0);
    if (r.error) this.metrics.decodeErrors++;
    // The grants this batch freed go out within the reply linger, even while the socket keeps the loop reading.
    this.#lanes.batcher(from, lane)?.afterIngress();
  }

  // ───────────────────────── peer windows (peer-windows.ts) ─────────────────────────

  /** Data-record bytes this node holds for `peer`'s current link (slot buffers, holds, unread records of retired slots). */
  receiverHeldBytes(peer: PeerId): number {
    return this.#windows.heldBytes(peer);
  }

  /** Bytes this node has in flight toward `peer` against its window. */
  senderInflightBytes(peer: PeerId): number {
    return this.#windows.inflightBytes(peer);
  }

  /** The window `peer` advertised, if both sides advertised one (else `Infinity`: no limit). */
  sendWindow(peer: PeerId): number {
    return this.#windows.sendWindow(peer);
  }

  peerEgress(peer: PeerId): PeerEgress {
    return this.#windows.egress(peer);
  }

  // ───────────────────────── rendezvous ─────────────────────────

  stage(peer: PeerId, lane: number, payload: Uint8Array, muxSlot: string): { id: number; admission: Admission } {
    this.#timer.armSweep();
    return this.#producerStage().stage(peer, lane, payload, muxSlot);
  }

  stageRoom(peer: PeerId, size: number): boolean {
    return this.#producerStage().hasRoom(peer, size);
  }

  whenStageRoom(peer: PeerId, cb: () => void): void {
    this.#producerStage().whenRoom(peer, cb);
  }

  /** Staging is reached only from a producer's slot, which only a mux with producer parts opens. */
  #producerStage(): StageOut {
    if (this.#stageOut === null)
      throw new MuxError('ERR_CLOSED', 'this mux does not produce (a client has no staging)');
    return this.#stageOut;
  }

  /** A staged transfer was refused or failed: end just its stream, and cancel its producer. */
  #refuseStaged(peer: PeerId, lane: number, epoch: bigint, slot: number, session: bigint, message: string): void {
    this.metrics.stagedRefused++;
    const table = this.#lanes.tableAt(peer, lane);
    if (table === undefined || !table.refuseStaged(epoch, slot, session, message)) return;
    // LifecycleSlot names the session: a late CloseSlot could end a later stream that reuses the id.
    if (this.peerAlive(peer)) this.#lanes.batcherFor(peer, lane).inbox.postReplyLifecycle(slot, session, true);
  }

  // ───────────────────────── IngressHost ─────────────────────────

  findBind(anchorId: bigint, sessionId: bigint, peer: PeerId): Bind | undefined {
    return this.#binds.find(anchorId, sessionId, peer);
  }

  bindClaimed(bind: Bind): void {
    if (bind.slot === null) return;
    this.#binds.claimed(bind);
    // A stop or cancel made before the OpenSlot is delivered at claim (docs/protocol.md §10.3).
    if (bind.earlySignal > 0) this.signalLifecycle(bind, bind.earlySignal === 2);
  }

  bindEnded(bind: Bind, end: BindEnd): void {
    this.#binds.ended(bind, end);
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
    if (!this.#lanes.batcherFor(peer, lane).inbox.postReplyCredit(peerSlot, delta)) {
      // The inbox closed under us (retiring batcher): re-resolve once.
      if (this.#lanes.batcherFor(peer, lane).inbox.postReplyCredit(peerSlot, delta))
        this.metrics.creditReposted += delta;
      else this.metrics.creditLost += delta;
    }
  }

  replyClose(peer: PeerId, lane: number, peerSlot: number, reason: number): void {
    if (!this.peerAlive(peer)) return;
    if (!this.#lanes.batcherFor(peer, lane).inbox.postReplyClose(peerSlot, reason))
      this.#lanes.batcherFor(peer, lane).inbox.postReplyClose(peerSlot, reason);
  }

  replyReject(peer: PeerId, lane: number, peerSlot: number, reason: number): void {
    if (!this.peerAlive(peer)) return;
    if (!this.#lanes.batcherFor(peer, lane).inbox.postReject(peerSlot, reason)) this.metrics.controlRefused++;
  }

  // Control for a slot not live here is counted (straggler or no route) and then handled as it
  // always was: the inbox still decides what is refused (docs/protocol.md §10.9).
  ownedCredit(peer: PeerId, lane: number, slot: number, delta: number): void {
    const b = this.#lanes.batcher(peer, lane);
    if (b?.slotFor(slot) === undefined) this.#notLive(peer, lane, slot, RecordType.CreditUpdate);
    if (!b || !b.inbox.postCredit(slot, delta)) this.metrics.controlRefused++;
  }

  ownedClose(peer: PeerId, lane: number, slot: number, reason: number): void {
    const b = this.#lanes.batcher(peer, lane);
    if (b?.slotFor(slot) === undefined) this.#notLive(peer, lane, slot, RecordType.CloseSlot);
    if (!b || !b.inbox.postClose(slot, reason)) this.metrics.controlRefused++;
  }

  ownedLifecycle(peer: PeerId, lane: number, slot: number, session: bigint, cancel: boolean): void {
    const b = this.#lanes.batcher(peer, lane);
    if (b?.slotFor(slot) === undefined) this.#notLive(peer, lane, slot, RecordType.LifecycleSlot, session);
    if (!b || !b.inbox.postLifecycle(slot, session, cancel)) this.metrics.controlRefused++;
  }

  /** A record of `type` names an owned slot that is not live: a straggler if it ended moments ago, else no route. */
  #notLive(peer: PeerId, lane: number, slot: number, type: number, session?: bigint): void {
    const ended = this.#lanes.endedOwned(peer, lane);
    const recent = ended !== undefined && (session === undefined ? ended.has(slot) : ended.hasSession(slot, session));
    if (recent) this.metrics.straggler(type, peer, lane);
    else this.metrics.noRouteFor(type, peer, lane);
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
    return leastLoaded(peer === null ? this.#binds.load.node : this.#binds.load.of(peer), lanes);
  }

  /**
   * Reserve (anchor, new session) for an OpenSlot to claim: answers an attach (`peer` known) or
   * mints a pre-bind (`peer` null). The bind owns the C+1 buffer the consumer reads.
   */
  bind(anchorId: bigint, owner: BindOwner, peer: PeerId | null, key?: bigint, limit?: number): Bind {
    const bind = this.#binds.add(anchorId, owner, peer, this.chooseLane(peer, key), limit);
    this.#timer.armSweep();
    return bind;
  }

  /** Give a bind back: unclaimed → released at once; claimed → the slot closes and the owner is told. */
  releaseBind(bind: Bind): void {
    if (bind.ended) return;
    const slot = bind.slot;
    if (slot !== null) slot.consumerGone();
    else {
      bind.buffer.close();
      this.#binds.ended(bind, 'released');
      // An attach cancelled before its OpenSlot arrived: its producer is told the cancel when the
      // OpenSlot comes, not a bare UnknownSlot (docs/protocol.md §10.3).
      if (bind.earlySignal === 2 && bind.peer !== null && this.peerAlive(bind.peer)) {
        this.#binds.cancelled(bind);
        this.#timer.armSweep();
      }
    }
  }

  /**
   * A resume from `peer` names `session` (docs/protocol.md §8.3) while its bind still looks live: the
   * old link is lost (the new one came up before the loss was reported). Retire that slot (or end
   * the unclaimed bind) as a lost link; true if its owner suspended it.
   */
  suspendLive(anchorId: bigint, session: bigint, peer: PeerId): boolean {
    const bind = this.#binds.get(session);
    if (bind === undefined || bind.anchorId !== anchorId) return false;
    const slot = bind.slot;
    // A pre-bind no OpenSlot claimed (its first batch was lost with the link) names no peer: the
    // session, known only from the ticket, is what the resume proves, as a claim would.
    if ((slot?.peer ?? bind.peer ?? peer) !== peer) return false;
    if (slot !== null) {
      slot.linkLost();
      return bind.ended;
    }
    if (bind.owner.suspend?.(bind, peer) !== true) return false;
    bind.buffer.close();
    this.#binds.ended(bind, 'suspended');
    return true;
  }

  /** IngressHost: an OpenSlot for an attach its consumer already cancelled gets the cancel. */
  claimCancelled(anchorId: bigint, sessionId: bigint, peer: PeerId, lane: number, slot: number): boolean {
    if (!this.#binds.takeCancelled(anchorId, sessionId, peer)) return false;
    // Both replies in one inbox, so they go as a pair in one batch. batcherFor never returns a
    // retired batcher, and only retirement closes an inbox.
    const inbox = this.#lanes.batcherFor(peer, lane).inbox;
    inbox.postReplyClose(slot, CloseReason.UnknownSlot);
    inbox.postReplyLifecycle(slot, sessionId, true);
    return true;
  }

  /** A consumer stop (cancel=false) or cancel for a claimed bind: a LifecycleSlot to the owner. */
  signalLifecycle(bind: Bind, cancel: boolean): void {
    const slot = bind.slot;
    if (slot === null) {
      bind.earlySignal = Math.max(bind.earlySignal, cancel ? 2 : 1);
      return;
    }
    this.#lanes.batcherFor(slot.peer, slot.lane).inbox.postReplyLifecycle(slot.id, bind.sessionId, cancel);
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
    // A client's mux (no producer parts) writes replies only: it has no batcher to open a slot on.
    if (this.#stageOut === null) throw new MuxError('ERR_CLOSED', 'this mux does not produce (a client opens no slot)');
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
   * `HEARTBEAT_FLOOR_MS`); the first is due one interval from now. The node's one timer wakes
   * for the earliest heartbeat due, so a stream beats at its interval (up to a tenth early, when
   * that lets it share a wake), not on the sweep tick.
   */
  addHeartbeat(sender: HeartbeatSender): void {
    this.#timer.addHeartbeat(sender);
  }

  removeHeartbeat(sender: HeartbeatSender): void {
    this.#timer.removeHeartbeat(sender);
  }

  /** `flushBatch()`: kick every batcher. Synchronous; never throws. */
  flushBatch(): void {
    for (const arr of this.#lanes.allBatchers()) {
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

  #hasWork(): boolean {
    return (
      this.#lanes.batchers.length > 0 ||
      this.#lanes.tables.length > 0 ||
      this.#binds.busy ||
      (this.#stageOut?.pending ?? 0) > 0
    );
  }

  /** Keep the sweep running while the node has work (called when work appears). */
  touch(): void {
    this.#timer.armSweep();
  }

  /**
   * One sweep tick: reconcile every ingress slot, expire binds, run watchdog windows, send due
   * heartbeats, health-check peers with live slots, evict idle batchers. Skips each walk when it
   * has nothing to visit.
   */
  sweep(): void {
    if (this.#closed) return;
    const now = this.runtime.now();
    const tables = this.#lanes.tables;
    for (let i = 0; i < tables.length; i++) {
      const t = tables[i]!;
      if (t.liveSlots === 0) continue;
      t.sweep();
      // A consumer checks the producer that streams to it as a producer checks its consumer.
      this.#healthCheckDue(t.peer, now);
    }
    this.#binds.expire(now);
    this.#watchdog.tick(now, tables);
    this.#timer.beat(now);
    // Backstop for records larger than a batch: released bytes the immediate conditions kept back.
    this.#windows.flushPending();
    this.#stageOut?.expire(now);
    this.#checkBatchers(now);
  }

  #checkBatchers(now: number): void {
    const list = this.#lanes.batchers;
    if (list.length === 0) return;
    const idleTicks = Math.max(1, Math.floor(this.config.batcherIdleTtl / this.config.creditSweepInterval));
    let removed = false;
    for (let i = 0; i < list.length; i++) {
      const b = list[i]!;
      if (b.retired) {
        removed = true;
        continue;
      }
      const { peer, lane } = b;
      if (b.liveSlots > 0) this.#healthCheckDue(peer, now);
      const ingressLive = this.#lanes.tableAt(peer, lane)?.liveSlots ?? 0;
      if (b.idle && ingressLive === 0) {
        if (++b.idleTicks >= idleTicks) {
          const left = b.retire();
          removed = true;
          this.repostCredit(peer, lane, left.credit);
        }
      } else b.idleTicks = 0;
    }
    if (removed) this.#lanes.prune();
  }

  /**
   * Health-check `peer` if its interval has passed: one check per peer per interval, whatever its lane count and
   * whether its live slots send or receive. Without the receiving side a consumer learnt of a producer that died
   * silently only from its stream watchdogs (`detectionMultiplier` heartbeat windows), whatever
   * `healthCheckInterval` said.
   */
  #healthCheckDue(peer: PeerId, now: number): void {
    if (now - (this.#lastHealthChecks.get(peer) ?? 0) < this.config.healthCheckInterval) return;
    this.#lastHealthChecks.set(peer, now);
    this.#healthCheck(peer);
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
        // §3.4), not that this node closed normally.
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
    // The loss's own error is the cause: a peer that closed on purpose (ERR_CLOSED) is not resumed.
    const error = new MuxError('ERR_SENDER_DROPPED', `peer ${ev.peer} is gone: ${ev.reason}`, {
      retryable: true,
      cause: ev.error,
    });
    const current = this.#messenger.peer(ev.peer);
    if (current !== undefined && current.epoch !== ev.epoch) {
      // An older link of a peer that is connected again: only batches pinned to that link are
      // lost. Its batchers die an epoch (their slots fail once); the new link's ingress stays.
      for (const b of this.#lanes.batchersOf(ev.peer)) {
        if (b !== undefined && !b.retired && b.linkEpoch !== undefined && b.linkEpoch !== current.epoch)
          b.epochDeath(error);
      }
      return;
    }
    this.#failPeer(ev.peer, error, true, !closedOnPurpose(ev.error));
  }

  /** Epoch death on every lane toward `peer`; with `ingressToo`, retire its ingress tables (Dropped each). */
  #failPeer(peer: PeerId, error: LanemuxError, ingressToo: boolean, linkLost = true): void {
    const arr = this.#lanes.batchersOf(peer);
    for (const b of arr) if (b !== undefined && !b.retired && b.liveSlots > 0) b.epochDeath(error);
    if (!ingressToo) return;
    this.#stageOut?.peerGone(peer);
    this.#stageIn.peerGone(peer);
    if (arr.length > 0) {
      for (const b of arr) if (b !== undefined && !b.retired) b.retire(error);
      this.#lanes.prune();
    }
    // Binds answered to this peer and never claimed: its link (and the batcher that would open
    // them) is gone, so they end now (Dropped).
    // A lost link (not a peer that left on purpose) lets streams kept for a resume wait (docs/protocol.md §8.3).
    this.#binds.peerGone(peer, linkLost);
    if (this.#lanes.retireTables(peer, linkLost)) this.#binds.load.forget(peer);
    this.#windows.forget(peer);
    this.#watchdog.forget(peer);
    this.#lastHealthChecks.delete(peer);
  }

  /**
   * True while streams with `peer` are live or about to be: slots it sends us or we send it, or binds
   * answered to it. Such a link must not be closed as idle or evicted (the messenger asks).
   */
  busy(peer: PeerId): boolean {
    if (this.#lanes.live(peer)) return true;
    const load = this.#binds.load.peek(peer);
    if (load !== undefined) for (let i = 0; i < load.length; i++) if (load[i]! > 0) return true;
    return false;
  }

  /** True when nothing this node's producers handed over waits to be written: no live egress slot, nothing staged or unadmitted. */
  get egressIdle(): boolean {
    for (const b of this.#lanes.batchers) if (!b.retired && (b.liveSlots > 0 || b.staged > 0 || b.parked)) return false;
    return true;
  }

  /** Binds held now (the `live_binds` gauge of `node.metrics()`). */
  get liveBinds(): number {
    return this.#binds.size;
  }

  /** Live slots on both sides (the `live_slots` gauge). */
  get liveSlots(): number {
    return this.metrics.liveSlots;
  }

  /**
   * @internal The credit counters of every live slot, by session, for a conservation check (the
   * simulator's): each sender's ledger, and what each receiver holds unread and owes ungranted.
   * Also whether binds wait. Not a hot path: it allocates.
   */
  creditCounters(): {
    egress: Map<bigint, SenderLedger>;
    ingress: Map<bigint, { limit: number; outstanding: number; ungranted: number }>;
    bindsBusy: boolean;
  } {
    const egress = new Map<bigint, SenderLedger>();
    for (const b of this.#lanes.batchers)
      if (!b.retired) for (const e of b.slots()) if (!e.closed) egress.set(e.sessionId, e.ledger);
    const ingress = new Map<bigint, { limit: number; outstanding: number; ungranted: number }>();
    for (const t of this.#lanes.tables)
      for (const s of t.liveSlotsNow())
        if (!s.closed)
          ingress.set(s.bind.sessionId, {
            limit: s.account.limit,
            outstanding: s.account.dataOutstanding,
            ungranted: s.account.ungranted,
          });
    return { egress, ingress, bindsBusy: this.#binds.busy };
  }

  /** Stop sending, then retire every ingress slot (Dropped) and every bind. */
  close(): void {
    if (this.#closed) return;
    // Stop sending first: what producers handed over before close() is written, then retired.
    this.#lanes.close();
    this.#binds.dropAll();
    this.#windows.close();
    // Staged transfers die with the node: nothing would expire them once the sweep stops.
    this.#stageOut?.close();
    this.#stageIn.close();
    this.#closed = true;
    this.#timer.close();
    for (const u of this.#unsubscribe) u();
    this.#binds.clearCancelled();
  }
}
