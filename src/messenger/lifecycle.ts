/**
 * The life of each peer instance as the application sees it: `up`, `down`, `reconnecting`,
 * `resumed`, `gone` (see `PeerStateType` for the order). Fed by the peer table (links formed and
 * lost) and the transport (dials trying again or giving up). A peer that is down with nothing
 * re-dialling it waits `downTimeoutMs` for its return (it may dial this node again); the number of
 * such peers is bounded by `maxPeers`, the oldest declared gone first.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import { TransportError } from '../transport/errors.ts';
import type { PeerLink, RedialEvent } from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import type { Faults } from './faults.ts';
import type { PeerId, PeerStateEvent, PeerStateType } from './types.ts';

/** What is known of one peer instance until it is gone. */
interface Peer {
  readonly id: PeerId;
  readonly workerId: bigint;
  readonly instanceId: string;
  address: string | undefined;
  epoch: number;
  state: 'live' | 'down' | 'reconnecting';
  /** `down` with nothing re-dialling: when it is declared gone. */
  timer: TimerHandle | undefined;
}

/** The peer's GOAWAY said it closed the link on purpose (it shut down, or dropped this node). */
function closedByPeer(error: LanemuxError): boolean {
  const cause = error.cause;
  return error.code === 'ERR_PEER_GONE' && cause instanceof LanemuxError && cause.code === 'ERR_CLOSED';
}

/** The lifecycle of every peer of one messenger, and its listeners. */
export class PeerLifecycle {
  readonly #peers = new Map<PeerId, Peer>();
  readonly #listeners = new Set<(event: PeerStateEvent) => void>();
  readonly #closeListeners = new Set<() => void>();
  readonly #rt: Runtime;
  readonly #faults: Faults;
  readonly #downTimeoutMs: number;
  readonly #maxDown: number;
  #down = 0;
  #closing = false;
  #closed = false;

  constructor(rt: Runtime, faults: Faults, downTimeoutMs: number, maxDown: number) {
    this.#rt = rt;
    this.#faults = faults;
    this.#downTimeoutMs = downTimeoutMs;
    this.#maxDown = maxDown;
  }

  on(listener: (event: PeerStateEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Called once when the messenger has closed (after the last `gone`). Returns an unsubscribe function. */
  whenClosed(listener: () => void): () => void {
    if (this.#closed) {
      listener();
      return () => {};
    }
    this.#closeListeners.add(listener);
    return () => this.#closeListeners.delete(listener);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The messenger is closing or closed. */
  get isClosing(): boolean {
    return this.#closing;
  }

  /** `down` or `reconnecting` if the peer is known and not connected; `live`; else undefined. */
  state(peer: PeerId): 'live' | 'down' | 'reconnecting' | undefined {
    return this.#peers.get(peer)?.state;
  }

  /** The connected peer at `address`, if any. */
  liveAt(address: string): PeerId | undefined {
    for (const p of this.#peers.values()) if (p.state === 'live' && p.address === address) return p.id;
    return undefined;
  }

  /** True if a peer at `address` is down and not gone yet. */
  downAt(address: string): boolean {
    for (const p of this.#peers.values()) if (p.state !== 'live' && p.address === address) return true;
    return false;
  }

  /** A link formed (after the messenger announced it). */
  linkUp(link: PeerLink): void {
    const info = link.info;
    const address = link.dialAddress ?? info.address;
    const known = this.#peers.get(info.id);
    if (known !== undefined && known.instanceId === info.instanceId) {
      this.#clearTimer(known);
      if (known.state !== 'live') this.#down--;
      known.state = 'live';
      known.epoch = info.epoch;
      known.address = address;
      this.#emit(known, 'resumed', undefined);
      return;
    }
    if (known !== undefined) {
      const why = new TransportError(
        'ERR_PEER_GONE',
        `worker ${info.id} came back as another instance (${info.instanceId}, was ${known.instanceId})`,
        { retryable: true },
      );
      if (known.state === 'live') {
        known.state = 'down';
        this.#down++;
        this.#emit(known, 'down', why);
      }
      this.#gone(known, why);
    }
    // A dial that re-dialled a lost peer reached another worker at its address: that peer is not
    // coming back on it (nothing dials it any more), so it is gone now, not when a timer says so.
    if (link.dialAddress !== undefined) {
      for (const p of [...this.#peers.values()]) {
        if (p.id === info.id || p.state === 'live' || p.address !== link.dialAddress) continue;
        this.#gone(
          p,
          new TransportError(
            'ERR_PEER_GONE',
            `${link.dialAddress} now answers as worker ${info.id}: worker ${p.id} is not coming back there`,
            { retryable: true },
          ),
          info.id,
        );
      }
    }
    const peer: Peer = {
      id: info.id,
      workerId: info.workerId,
      instanceId: info.instanceId,
      address,
      epoch: info.epoch,
      state: 'live',
      timer: undefined,
    };
    this.#peers.set(peer.id, peer);
    this.#emit(peer, 'up', undefined);
  }

  /** A link was lost (after the messenger failed what waited on it). */
  linkDown(link: PeerLink, error: LanemuxError): void {
    const peer = this.#peers.get(link.info.id);
    if (peer === undefined || peer.state !== 'live' || peer.epoch !== link.info.epoch) return;
    peer.state = 'down';
    this.#down++;
    this.#emit(peer, 'down', error);
    // Closed on purpose, by either side: this instance is not coming back.
    if (this.#closing || error.code === 'ERR_CLOSED' || closedByPeer(error)) {
      this.#gone(peer, error);
      return;
    }
    // Until a dial says it is re-dialling (it does so at once, in the same task), wait for the peer.
    const ms = this.#downTimeoutMs;
    peer.timer = this.#rt.setTimer(() => {
      peer.timer = undefined;
      this.#gone(
        peer,
        new TransportError('ERR_PEER_GONE', `peer ${peer.id} did not come back within ${ms} ms: ${error.message}`, {
          cause: error,
          retryable: true,
        }),
      );
    }, ms);
    if (this.#down > this.#maxDown) this.#evictOldestDown(peer);
  }

  /** The peer said it is draining: `draining` for its live link (not for a peer that is down). */
  draining(id: PeerId): void {
    const peer = this.#peers.get(id);
    if (peer?.state === 'live') this.#emit(peer, 'draining', undefined);
  }

  /** A dial is trying again: a peer it last reached that is down is now `reconnecting`. */
  redial(event: RedialEvent): void {
    const peer = event.worker === undefined ? undefined : this.#peers.get(event.worker);
    if (peer === undefined || peer.state === 'live') return;
    this.#clearTimer(peer);
    peer.state = 'reconnecting';
    this.#emit(peer, 'reconnecting', event.error, event.attempt, event.delayMs);
  }

  /** A dial stopped for good: a peer it was re-dialling is gone. */
  dialEnded(error: LanemuxError, worker: string | undefined): void {
    const peer = worker === undefined ? undefined : this.#peers.get(worker);
    if (peer?.state === 'reconnecting') this.#gone(peer, error);
  }

  /** The messenger is closing: every link lost from now on is `gone` at once. */
  closing(): void {
    this.#closing = true;
  }

  /** The messenger closed: whoever is left is gone. */
  close(): void {
    this.#closing = true;
    const error = new TransportError('ERR_CLOSED', 'the messenger closed');
    for (const peer of [...this.#peers.values()]) {
      if (peer.state === 'live') {
        peer.state = 'down';
        this.#down++;
        this.#emit(peer, 'down', error);
      }
      this.#gone(peer, error);
    }
    this.#closed = true;
    for (const l of [...this.#closeListeners]) {
      try {
        l();
      } catch (e) {
        this.#faults.reportError('handler', e, undefined, 'onPeerState');
      }
    }
    this.#closeListeners.clear();
  }

  #evictOldestDown(except: Peer): void {
    for (const p of this.#peers.values()) {
      if (p.state === 'live' || p === except) continue;
      this.#gone(
        p,
        new TransportError('ERR_PEER_GONE', `peer ${p.id} dropped: more than ${this.#maxDown} peers are down`, {
          retryable: true,
        }),
      );
      return;
    }
  }

  #gone(peer: Peer, error: LanemuxError, replacedBy?: PeerId): void {
    if (this.#peers.get(peer.id) !== peer) return;
    this.#clearTimer(peer);
    this.#peers.delete(peer.id);
    if (peer.state !== 'live') this.#down--;
    this.#emit(peer, 'gone', error, undefined, undefined, replacedBy);
  }

  #clearTimer(peer: Peer): void {
    if (peer.timer === undefined) return;
    this.#rt.clearTimer(peer.timer);
    peer.timer = undefined;
  }

  #emit(
    peer: Peer,
    type: PeerStateType,
    error: LanemuxError | undefined,
    attempt?: number,
    delayMs?: number,
    replacedBy?: PeerId,
  ): void {
    if (this.#listeners.size === 0) return;
    const event: PeerStateEvent = {
      type,
      peer: peer.id,
      workerId: peer.workerId,
      instanceId: peer.instanceId,
      address: peer.address,
      epoch: peer.epoch,
      error,
      attempt,
      delayMs,
      ...(replacedBy !== undefined ? { replacedBy } : {}),
    };
    for (const l of [...this.#listeners]) {
      try {
        l(event);
      } catch (e) {
        this.#faults.reportError('handler', e, peer.id, 'onPeerState');
      }
    }
  }
}
