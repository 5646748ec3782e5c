/**
 * The per-(peer, lane) parts of a node's mux: a lane writer for egress (a batcher on a node, a
 * reply lane on a client: see lane-writer.ts; still called batchers here) and an ingress table for
 * what arrives, each made on first use, by peer; the hold budget a peer's tables share; and flat lists
 * of both for the sweep (index loops, so a tick on an idle node allocates nothing). A retired
 * batcher is replaced on next use and pruned from the lists; a peer's tables go with the peer.
 */
import { ByteBudget } from '../credit/byte-budget.ts';
import type { PeerId } from '../messenger/types.ts';
import { EndedSlots } from './ended-slots.ts';
import type { BatcherHost } from './batcher-host.ts';
import { type IngressHost, IngressTable } from './ingress.ts';
import type { IngressWindow } from './ingress-window.ts';
import type { LaneWriter, LaneWriterFactory } from './lane-writer.ts';

const NONE: readonly never[] = [];

export class PeerLanes {
  /** Every batcher not yet pruned (retired ones until the next prune), for the sweep. */
  batchers: LaneWriter[] = [];
  /** Every ingress table, for the sweep. */
  tables: IngressTable[] = [];
  readonly #host: BatcherHost & IngressHost;
  readonly #peerByteBudget: number;
  readonly #windowFor: (peer: PeerId) => IngressWindow;
  readonly #makeWriter: LaneWriterFactory;
  readonly #added: () => void;
  readonly #batchers = new Map<PeerId, Array<LaneWriter | undefined>>();
  readonly #tables = new Map<PeerId, Array<IngressTable | undefined>>();
  readonly #budgets = new Map<PeerId, ByteBudget>();
  /** Owned slots ended recently, by (peer, lane): they outlive a retired batcher, as the peer's late control does. */
  readonly #ended = new Map<PeerId, Array<EndedSlots | undefined>>();

  /**
   * `host` is every part's mux; a new table charges `windowFor(peer)` and holds at most
   * `peerByteBudget` ahead of sequence across the peer's tables; `added()` runs when a part is made;
   * `makeWriter` makes a lane's writer.
   */
  constructor(
    host: BatcherHost & IngressHost,
    peerByteBudget: number,
    windowFor: (peer: PeerId) => IngressWindow,
    added: () => void,
    makeWriter: LaneWriterFactory,
  ) {
    this.#makeWriter = makeWriter;
    this.#host = host;
    this.#peerByteBudget = peerByteBudget;
    this.#windowFor = windowFor;
    this.#added = added;
  }

  /** The batcher for (peer, lane), made on first use (and again after it retired). */
  batcherFor(peer: PeerId, lane: number): LaneWriter {
    const live = this.#batchers.get(peer)?.[lane];
    if (live !== undefined && !live.retired) return live;
    const ended = byLane(this.#ended, peer);
    // A late credit or close from the peer for the retired batcher's slots must find nothing here.
    const b = this.#makeWriter(this.#host, peer, lane, (ended[lane] ??= new EndedSlots()), live);
    byLane(this.#batchers, peer)[lane] = b;
    this.batchers.push(b);
    this.#added();
    return b;
  }

  /** The live batcher for (peer, lane), if any (never makes one). */
  batcher(peer: PeerId, lane: number): LaneWriter | undefined {
    const b = this.#batchers.get(peer)?.[lane];
    return b !== undefined && !b.retired ? b : undefined;
  }

  /** The batchers toward `peer` by lane (holes where none was made or one was pruned). */
  batchersOf(peer: PeerId): ReadonlyArray<LaneWriter | undefined> {
    return this.#batchers.get(peer) ?? NONE;
  }

  /** Every peer's batchers by lane. */
  allBatchers(): IterableIterator<ReadonlyArray<LaneWriter | undefined>> {
    return this.#batchers.values();
  }

  /** Owned slots of (peer, lane) that ended recently, if a batcher was ever made there. */
  endedOwned(peer: PeerId, lane: number): EndedSlots | undefined {
    return this.#ended.get(peer)?.[lane];
  }

  /** The ingress table of (peer, lane), made on first use. */
  table(peer: PeerId, lane: number): IngressTable {
    const existing = this.#tables.get(peer)?.[lane];
    if (existing !== undefined) return existing;
    let budget = this.#budgets.get(peer);
    if (!budget) {
      budget = new ByteBudget(this.#peerByteBudget);
      this.#budgets.set(peer, budget);
    }
    const t = new IngressTable(this.#host, peer, lane, budget);
    t.window = this.#windowFor(peer);
    byLane(this.#tables, peer)[lane] = t;
    this.tables.push(t);
    this.#added();
    return t;
  }

  /** The ingress table of (peer, lane), if any (never makes one). */
  tableAt(peer: PeerId, lane: number): IngressTable | undefined {
    return this.#tables.get(peer)?.[lane];
  }

  /** The ingress tables of `peer` by lane. */
  tablesOf(peer: PeerId): ReadonlyArray<IngressTable | undefined> {
    return this.#tables.get(peer) ?? NONE;
  }

  /** Drop retired batchers from the registry and the sweep list. */
  prune(): void {
    this.batchers = this.batchers.filter((b) => !b.retired);
    for (const [peer, arr] of this.#batchers) {
      for (let lane = 0; lane < arr.length; lane++) if (arr[lane]?.retired) arr[lane] = undefined;
      if (arr.every((b) => b === undefined)) this.#batchers.delete(peer);
    }
  }

  /** `peer` is gone: retire its tables (Dropped each) and forget them. False if it had none. */
  retireTables(peer: PeerId, linkLost = true): boolean {
    this.#ended.delete(peer);
    const tables = this.#tables.get(peer);
    if (!tables) return false;
    // The peer's link is gone: a stream its owner keeps for a resume is suspended, not Dropped.
    for (const t of tables) if (t !== undefined) t.retireAll(linkLost);
    this.#tables.delete(peer);
    this.tables = this.tables.filter((t) => t.peer !== peer);
    this.#budgets.delete(peer);
    return true;
  }

  /** True while a slot toward or from `peer` is live. */
  live(peer: PeerId): boolean {
    for (const b of this.#batchers.get(peer) ?? NONE) if (b !== undefined && b.liveSlots > 0) return true;
    for (const t of this.#tables.get(peer) ?? NONE) if (t !== undefined && t.liveSlots > 0) return true;
    return false;
  }

  /** The node closes: write what producers handed over, then retire every batcher and every table. */
  close(): void {
    for (const b of this.batchers) if (!b.retired) b.kick();
    for (const arr of this.#batchers.values()) for (const b of arr) if (b !== undefined && !b.retired) b.retire();
    this.#batchers.clear();
    this.#ended.clear();
    this.batchers = [];
    for (const t of this.tables) t.retireAll();
    this.#tables.clear();
    this.tables = [];
  }
}

/** `peer`'s parts by lane in `map`, made on first use. */
function byLane<T>(map: Map<PeerId, Array<T | undefined>>, peer: PeerId): Array<T | undefined> {
  let arr = map.get(peer);
  if (!arr) {
    arr = [];
    map.set(peer, arr);
  }
  return arr;
}
