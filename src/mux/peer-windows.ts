/**
 * A node's peer windows, both ways (peer-window.ts has the account and the update's wire form):
 * per peer, the receive account of its current link, whose released bytes go back to the peer in
 * updates, and the egress toward it (`PeerEgress`), which the peer's updates release. Touched per
 * batch (the account of the link a batch came on), never per record.
 */
import { ReceiveWindow } from '../credit/peer-window.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { Admission, Messenger, PeerId } from '../messenger/types.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MuxError } from './errors.ts';
import type { PeerEgress } from './peer-egress.ts';
import {
  decodeWindowUpdate,
  encodeWindowUpdate,
  PeerWindowIn,
  type PeerWindowHost,
  WINDOW_HANDLER,
  WINDOW_UPDATE_BYTES,
} from './peer-window.ts';

export class PeerWindows implements PeerWindowHost {
  readonly metrics: MuxMetrics;
  readonly #messenger: Messenger;
  readonly #runtime: Runtime;
  readonly #peerByteBudget: number;
  /** The window this node advertised (undefined: none). */
  readonly #receiveWindow: number | undefined;
  /** A new receive account replaced `peer`'s: whatever charges the old one must charge this one. */
  readonly #onAccount: (peer: PeerId, w: PeerWindowIn) => void;
  /** Makes a peer's egress (a producing node's); null on a node that never sends records (a client's). */
  readonly #newEgress: ((limit: number, metrics: MuxMetrics) => PeerEgress) | null;
  /** Receive accounts by peer, for the peer's current link. */
  readonly #in = new Map<PeerId, PeerWindowIn>();
  readonly #egress = new Map<PeerId, PeerEgress>();
  /** The update body, reused (the messenger copies what it is given). */
  readonly #body = new Uint8Array(WINDOW_UPDATE_BYTES);
  #closed = false;

  /**
   * `receiveWindow`: what this node advertised in its HELLO (undefined: none, so nothing is limited
   * either way); `peerByteBudget` sizes the unadvertised accounts and each peer's egress bound;
   * `newEgress` makes a peer's egress on a node that sends records (null: never asked for one).
   */
  constructor(
    messenger: Messenger,
    runtime: Runtime,
    metrics: MuxMetrics,
    peerByteBudget: number,
    receiveWindow: number | undefined,
    onAccount: (peer: PeerId, w: PeerWindowIn) => void,
    newEgress: ((limit: number, metrics: MuxMetrics) => PeerEgress) | null,
  ) {
    this.#newEgress = newEgress;
    this.#messenger = messenger;
    this.#runtime = runtime;
    this.metrics = metrics;
    this.#peerByteBudget = peerByteBudget;
    this.#receiveWindow = receiveWindow;
    this.#onAccount = onAccount;
  }

  /** The receive account of `peer`'s current link (a newer link replaces it). */
  inFor(peer: PeerId): PeerWindowIn {
    const info = this.#messenger.peer(peer);
    const epoch = info?.epoch ?? 0;
    let w = this.#in.get(peer);
    if (w !== undefined && w.epoch === epoch) return w;
    if (w !== undefined) w.dead = true;
    // Active only when both sides advertised a window: the peer then limits what it sends and
    // expects updates; an older peer (no window) keeps today's behaviour, counted but not limited.
    const active = this.#receiveWindow !== undefined && info?.window !== undefined;
    const size = this.#receiveWindow ?? Math.min(this.#peerByteBudget, 0xffff_ffff);
    // A batch from the peer is at most its max message size toward us (the transport refuses more).
    w = new PeerWindowIn(
      this,
      peer,
      epoch,
      new ReceiveWindow(size, Math.max(0, this.#messenger.maxMessageSize(peer)), active),
    );
    this.#in.set(peer, w);
    this.#onAccount(peer, w);
    return w;
  }

  /** `peer`'s receive account, if it has one (never makes one). */
  receiving(peer: PeerId): PeerWindowIn | undefined {
    return this.#in.get(peer);
  }

  /** Data-record bytes this node holds for `peer`'s current link (slot buffers, holds, unread records of retired slots). */
  heldBytes(peer: PeerId): number {
    return this.#in.get(peer)?.account.held ?? 0;
  }

  /** Withheld bytes and the window toward `peer`, shared by its lanes (made on first use; asked only by batchers). */
  egress(peer: PeerId): PeerEgress {
    let e = this.#egress.get(peer);
    if (e === undefined) {
      if (this.#newEgress === null)
        throw new MuxError('ERR_CLOSED', 'this node sends no records (a client has no peer egress)');
      e = this.#newEgress(this.#peerByteBudget, this.metrics);
      this.#egress.set(peer, e);
    }
    return e;
  }

  /** Bytes this node has in flight toward `peer` against its window. */
  inflightBytes(peer: PeerId): number {
    return this.#egress.get(peer)?.sendWindow.inflight ?? 0;
  }

  /** The window `peer` advertised, if both sides advertised one (else `Infinity`: no limit). */
  sendWindow(peer: PeerId): number {
    if (this.#receiveWindow === undefined) return Number.POSITIVE_INFINITY;
    return this.#messenger.peer(peer)?.window ?? Number.POSITIVE_INFINITY;
  }

  /** PeerWindowHost: send the update from a macrotask, so a burst of takes makes one update. */
  reportDue(w: PeerWindowIn): void {
    this.#runtime.macrotask(() => this.#sendUpdate(w));
  }

  #sendUpdate(w: PeerWindowIn): void {
    w.pending = false;
    if (this.#closed || w.dead) return;
    const n = w.account.takeReport();
    if (n === 0) return;
    let admission: Admission;
    try {
      admission = this.#messenger.send(w.peer, 0, WINDOW_HANDLER, encodeWindowUpdate(n, this.#body));
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
  onUpdate(from: PeerId, payload: Uint8Array): void {
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

  /** The sweep's backstop for records larger than a batch: released bytes the immediate conditions kept back. */
  flushPending(): void {
    if (this.#in.size > 0) for (const w of this.#in.values()) w.flushIfPending();
  }

  /** `peer` is gone: nothing is in flight toward it, and its account reports no more. */
  forget(peer: PeerId): void {
    this.#egress.get(peer)?.close();
    this.#egress.delete(peer);
    const w = this.#in.get(peer);
    if (w !== undefined) {
      w.dead = true;
      this.#in.delete(peer);
    }
  }

  /** The node closes: no account reports again, no egress holds anything in flight. */
  close(): void {
    for (const w of this.#in.values()) w.dead = true;
    this.#in.clear();
    for (const e of this.#egress.values()) e.close();
    this.#closed = true;
  }
}
