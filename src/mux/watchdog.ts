/**
 * The stream watchdogs of a node's mux (docs/protocol.md §10.8 "Watchdog"): once per heartbeat
 * interval, on the sweep tick, every live ingress slot that received nothing for
 * `detectionMultiplier` windows in a row ends (Dropped), and so does an answered attach whose
 * OpenSlot never came. A sender without credit is exempt, and so is one this node's window may be
 * blocking (its heartbeat would overtake its queue): then its peer itself must answer a ping.
 */
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { PeerId } from '../messenger/types.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MPSC_ANCHOR_BIT } from '../wire/constants.ts';
import type { Bind } from './bind.ts';
import type { BindRegistry } from './bind-registry.ts';
import type { ResolvedMuxConfig } from './config.ts';
import { HEARTBEAT_FLOOR_MS } from './heartbeats.ts';
import type { IngressTable } from './ingress.ts';
import type { IngressSlot } from './ingress-slot.ts';
import type { PeerWindows } from './peer-windows.ts';

export class Watchdog {
  readonly #config: ResolvedMuxConfig;
  readonly #metrics: MuxMetrics;
  readonly #runtime: Runtime;
  readonly #windows: PeerWindows;
  readonly #binds: BindRegistry;
  readonly #healthCheck: (peer: PeerId) => void;
  #lastWindow: number;
  /** When each peer was last pinged because the window kept its silent slots from counting as dead. */
  readonly #pings = new Map<PeerId, number>();
  /** Scratch list of the window's silent attach binds (reused). */
  readonly #silentBinds: Bind[] = [];
  /** One watchdog window of an unclaimed attach bind: excused while its peer's window may block it. */
  readonly #watchBind = (b: Bind): void => {
    const peer = b.peer!;
    const w = this.#windows.receiving(peer);
    if (w !== undefined && w.account.mayBlock(Math.max(this.#config.stagedPayloadMax, w.account.maxBatch))) {
      b.deadWindows = 0;
      this.#windowHealthCheck(peer);
      return;
    }
    if (++b.deadWindows >= this.#config.detectionMultiplier) this.#silentBinds.push(b);
  };

  /** `healthCheck(peer)` pings a peer whose silence the window excused; the first window starts now. */
  constructor(
    config: ResolvedMuxConfig,
    metrics: MuxMetrics,
    runtime: Runtime,
    windows: PeerWindows,
    binds: BindRegistry,
    healthCheck: (peer: PeerId) => void,
  ) {
    this.#config = config;
    this.#metrics = metrics;
    this.#runtime = runtime;
    this.#windows = windows;
    this.#binds = binds;
    this.#healthCheck = healthCheck;
    this.#lastWindow = runtime.now();
  }

  /** The sweep tick: run a window over `tables` if one has passed since the last. */
  tick(now: number, tables: readonly IngressTable[]): void {
    // A window is the advertised interval, on the sweep tick: never shorter than a producer beats.
    if (now - this.#lastWindow < Math.max(HEARTBEAT_FLOOR_MS, this.#config.heartbeatInterval)) return;
    this.#lastWindow = now;
    this.#window(tables);
  }

  /** `peer` is gone: forget when it was last pinged. */
  forget(peer: PeerId): void {
    this.#pings.delete(peer);
  }

  /** One heartbeat window of every stream watchdog. */
  #window(tables: readonly IngressTable[]): void {
    const limit = this.#config.detectionMultiplier;
    // A sender blocked by this node's window cannot heartbeat (its heartbeat would overtake its
    // queue), like one without credit: no window of a peer whose window may block it counts as dead.
    // Any record up to stagedPayloadMax may be the one blocked, so with the default (64 MiB > the
    // window) that is any peer this node holds or owes released bytes for.
    const largest = this.#config.stagedPayloadMax;
    for (let i = 0; i < tables.length; i++) {
      const t = tables[i]!;
      if (t.liveSlots === 0) continue;
      const w = this.#windows.receiving(t.peer);
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
    // An answered attach whose OpenSlot never arrives is a silent stream like any other: the same
    // watchdog ends it after the same windows, not the accept window a minute later.
    if (this.#binds.attachesWaiting) {
      this.#binds.forEachWaitingAttach(this.#watchBind);
      const silent = this.#silentBinds;
      for (let i = 0; i < silent.length; i++) this.#dropSilentBind(silent[i]!);
      silent.length = 0;
    }
  }

  /** The watchdog ends an attach whose OpenSlot never came: Dropped to its consumer, counted as a firing. */
  #dropSilentBind(b: Bind): void {
    if (b.claimed || b.ended) return;
    if ((b.anchorId & MPSC_ANCHOR_BIT) === 0n) this.#metrics.watchdogFirings++;
    this.#binds.drop(b, true);
  }

  /** A health check of a peer whose silent slots the window excused, at most once per health-check interval. */
  #windowHealthCheck(peer: PeerId): void {
    const now = this.#runtime.now();
    if (now - (this.#pings.get(peer) ?? Number.NEGATIVE_INFINITY) < this.#config.healthCheckInterval) return;
    this.#pings.set(peer, now);
    this.#healthCheck(peer);
  }
}
