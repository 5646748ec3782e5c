/**
 * Peer tracking: the live link of each peer (one `PeerState` per link epoch), the `onPeer` and
 * `onPeerGone` listeners, what a link's end fails (its pending requests, pings and running
 * handlers), and the idle bound: links that carry nothing are closed past `idleTimeoutMs`, and at
 * `maxPeers` the one idle longest is offered for eviction (docs/protocol.md §3.7).
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { TransportError } from '../transport/errors.ts';
import type { LinkReceiver, PeerLink } from '../transport/port.ts';
import type { Dispatcher } from './dispatch.ts';
import type { Faults } from './faults.ts';
import type { PeerLifecycle } from './lifecycle.ts';
import type { ResolvedOptions } from './options.ts';
import { PeerState, abortInflight } from './peer-state.ts';
import type { PeerGoneEvent, PeerId, PeerInfo } from './types.ts';

/** The peers of one messenger, one live link each. */
export class PeerTable {
  /** The live link of each peer, in link order. The composition reads it directly (send path). */
  readonly byId = new Map<PeerId, PeerState>();
  readonly #o: ResolvedOptions;
  /** Health-check interval (also the idle tick), ms. */
  readonly #tickMs: number;
  readonly #dispatcher: Dispatcher;
  readonly #faults: Faults;
  readonly #peerListeners = new Set<(peer: PeerInfo) => void>();
  readonly #goneListeners = new Set<(event: PeerGoneEvent) => void>();
  readonly #lifecycle: PeerLifecycle;

  constructor(o: ResolvedOptions, tickMs: number, dispatcher: Dispatcher, faults: Faults, lifecycle: PeerLifecycle) {
    this.#o = o;
    this.#tickMs = tickMs;
    this.#dispatcher = dispatcher;
    this.#faults = faults;
    this.#lifecycle = lifecycle;
  }

  onPeer(listener: (peer: PeerInfo) => void): () => void {
    this.#peerListeners.add(listener);
    return () => this.#peerListeners.delete(listener);
  }

  onPeerGone(listener: (event: PeerGoneEvent) => void): () => void {
    this.#goneListeners.add(listener);
    return () => this.#goneListeners.delete(listener);
  }

  /** The transport established a link: it becomes the peer's live one. */
  established(link: PeerLink): LinkReceiver {
    const st = new PeerState(this.#dispatcher, this, link);
    this.byId.set(st.id, st);
    return st;
  }

  /** The link finished its hello: tell `onPeer`, then the peer's lifecycle (`up` or `resumed`). */
  ready(link: PeerLink): void {
    for (const l of [...this.#peerListeners]) {
      try {
        l(link.info);
      } catch (error) {
        this.#faults.reportError('handler', error, link.info.id, 'onPeer');
      }
    }
    if (!link.closed) this.#lifecycle.linkUp(link);
  }

  /** The state of `link` if it is its peer's live link and not dead. */
  live(link: PeerLink): PeerState | undefined {
    const st = this.byId.get(link.info.id);
    return st === undefined || st.link !== link || st.dead ? undefined : st;
  }

  /** The link ended: fail what waits on it, tell `onPeerGone`, then the peer's lifecycle (`down`). */
  linkGone(st: PeerState, error: LanemuxError): void {
    if (st.dead) return;
    st.dead = true;
    if (this.byId.get(st.id) === st) this.byId.delete(st.id);
    const fail =
      error.code === 'ERR_CLOSED'
        ? error
        : new TransportError('ERR_PEER_GONE', `peer ${st.id} is gone: ${error.message}`, {
            retryable: true,
            cause: error,
          });
    for (const p of [...st.requests.values()]) p.reject(fail);
    for (const p of [...st.pings.values()]) p.reject(fail);
    st.pings.clear();
    for (const c of st.inflight.values()) abortInflight(c, fail);
    st.inflight.clear();
    const event: PeerGoneEvent = { peer: st.id, code: error.code, reason: error.message, epoch: st.info.epoch, error };
    for (const l of [...this.#goneListeners]) {
      try {
        l(event);
      } catch (e) {
        this.#faults.reportError('handler', e, st.id, 'onPeerGone');
      }
    }
    this.#lifecycle.linkDown(st.link, error);
  }

  /** Count ticks without traffic per link; close links idle past `idleTimeoutMs`. */
  idleTick(): void {
    const limit = this.#o.idleTimeoutMs;
    for (const st of this.byId.values()) {
      if (st.dead) continue;
      if (st.activity !== st.activityAtTick || this.#busy(st)) {
        st.activityAtTick = st.activity;
        st.idleTicks = 0;
        continue;
      }
      st.idleTicks++;
      if (limit > 0 && st.idleTicks * this.#tickMs >= limit) {
        this.#faults.counts.idleClosed++;
        st.link.close(
          new TransportError('ERR_IDLE', `link to ${st.id} carried nothing for ${limit} ms`, { retryable: true }),
        );
      }
    }
  }

  /**
   * The link idle longest (at least one whole health-check interval without traffic), for an
   * eviction at `maxPeers`; among equals the oldest (peers iterate in link order).
   */
  evictable(): PeerLink | undefined {
    let best: PeerState | undefined;
    for (const st of this.byId.values()) {
      if (st.dead || st.idleTicks < 1 || this.#busy(st)) continue;
      if (best === undefined || st.idleTicks > best.idleTicks) best = st;
    }
    return best?.link;
  }

  /** Work in flight on the link, or live streams the node reports (`isBusy`). */
  #busy(st: PeerState): boolean {
    if (st.requests.size > 0 || st.inflight.size > 0) return true;
    try {
      return this.#o.isBusy?.(st.info) === true;
    } catch {
      return true;
    }
  }
}
