/**
 * Waiting for a link: `ready(address)` (a link to that address is up, now or after a reconnect) and
 * `waitForPeer(peer)` (a peer that is down comes back). Each wait is bounded by its timeout, ends on
 * abort and on close, and leaves no listener or timer behind once settled.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { TransportError } from '../transport/errors.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { checkTimeout } from './call-timeout.ts';
import { MessengerError } from './errors.ts';
import type { PeerLifecycle } from './lifecycle.ts';
import type { DialEndedEvent, PeerId, PeerInfo, PeerStateEvent, WaitOptions } from './types.ts';

/** Default longest `waitForPeer`, ms. */
export const DEFAULT_PEER_WAIT_MS = 10_000;

/** What the waits read of the messenger. */
export interface ReadinessHost {
  readonly rt: Runtime;
  readonly lifecycle: PeerLifecycle;
  /** Default longest `ready`, ms (the messenger's `connectTimeoutMs`). */
  readonly connectTimeoutMs: number;
  peer(id: PeerId): PeerInfo | undefined;
  /** True while a dial to `address` is alive. */
  dialing(address: string): boolean;
  onDialEnded(listener: (event: DialEndedEvent) => void): () => void;
}

/** How one wait settles: `settle(error)` rejects, `settle(undefined, value)` resolves. */
type Settle<T> = (error: LanemuxError | undefined, value?: T) => void;

/**
 * One bounded wait: `watch` subscribes what may settle it and returns its unsubscribes; the timeout,
 * the abort and the close are handled here.
 */
function boundedWait<T>(
  host: ReadinessHost,
  what: string,
  options: WaitOptions,
  defaultMs: number,
  timedOut: (ms: number) => LanemuxError,
  watch: (settle: Settle<T>) => Array<() => void>,
): Promise<T> {
  if (host.lifecycle.closed) return Promise.reject(new MessengerError('ERR_CLOSED', 'the messenger is closed'));
  const ms = options.timeoutMs ?? defaultMs;
  const bad = checkTimeout(what, ms);
  if (bad !== undefined) return Promise.reject(bad);
  const signal = options.signal;
  if (signal?.aborted === true)
    return Promise.reject(new TransportError('ERR_ABORTED', `${what} aborted`, { cause: signal.reason }));
  return new Promise<T>((resolve, reject) => {
    let offs: Array<() => void> = [];
    let pending = true;
    const settle: Settle<T> = (error, value) => {
      if (!pending) return;
      pending = false;
      host.rt.clearTimer(timer);
      signal?.removeEventListener('abort', onAbort);
      for (const off of offs) off();
      if (error !== undefined) reject(error);
      else resolve(value as T);
    };
    const closed = (): void => settle(new MessengerError('ERR_CLOSED', 'the messenger closed'));
    const onAbort = (): void => settle(new TransportError('ERR_ABORTED', `${what} aborted`, { cause: signal?.reason }));
    // Ref'd, as a connect's: an awaited wait settles before the process may exit.
    const timer = host.rt.setTimer(() => settle(timedOut(ms)), ms, true);
    signal?.addEventListener('abort', onAbort, { once: true });
    offs = [
      host.lifecycle.whenClosed(closed),
      ...watch((error, value) => (error !== undefined && host.lifecycle.isClosing ? closed() : settle(error, value))),
    ];
    if (!pending) for (const off of offs) off();
  });
}

/** See `Messenger.ready`. */
export function ready(host: ReadinessHost, address: string, options: WaitOptions = {}): Promise<PeerInfo> {
  const live = host.lifecycle.liveAt(address);
  const info = live === undefined ? undefined : host.peer(live);
  if (info !== undefined && !host.lifecycle.closed) return Promise.resolve(info);
  return boundedWait<PeerInfo>(
    host,
    `ready(${address})`,
    options,
    host.connectTimeoutMs,
    (ms) => new TransportError('ERR_CONNECT', `no link with ${address} within ${ms} ms`, { retryable: true }),
    (settle) => [
      host.lifecycle.on((e: PeerStateEvent) => {
        if (e.address !== address) return;
        if (e.type === 'up' || e.type === 'resumed') {
          const p = host.peer(e.peer);
          if (p !== undefined) settle(undefined, p);
        } else if (e.type === 'gone' && !host.dialing(address)) {
          settle(
            new TransportError('ERR_PEER_GONE', `the peer at ${address} is gone: ${e.error?.message ?? ''}`, {
              cause: e.error,
              retryable: true,
            }),
          );
        }
      }),
      // A dial that ended with no peer left to come back (a refused first connect, a re-dial that
      // gave up): nothing will make a link to that address.
      host.onDialEnded((e) => {
        if (e.address === address && !host.lifecycle.downAt(address)) settle(e.error as LanemuxError);
      }),
    ],
  );
}

/** See `Messenger.waitForPeer`: waits only while a dial re-dials the peer. */
export function waitForPeer(host: ReadinessHost, peer: PeerId, options: WaitOptions = {}): Promise<PeerId> {
  if (host.peer(peer) !== undefined && !host.lifecycle.closed) return Promise.resolve(peer);
  // Only a dial that is re-dialling the peer makes its return likely enough to wait for; a peer
  // that is merely down (nothing re-dials it) is refused at once, as one never seen.
  if (host.lifecycle.state(peer) !== 'reconnecting')
    return Promise.reject(
      new TransportError('ERR_UNKNOWN_PEER', `no connected peer ${peer} and no dial re-dialling it`, {
        retryable: true,
      }),
    );
  return boundedWait<PeerId>(
    host,
    `waiting for peer ${peer}`,
    options,
    DEFAULT_PEER_WAIT_MS,
    (ms) =>
      new TransportError('ERR_UNKNOWN_PEER', `peer ${peer} is reconnecting and did not come back within ${ms} ms`, {
        retryable: true,
      }),
    (settle) => [
      host.lifecycle.on((e: PeerStateEvent) => {
        if (e.peer !== peer) return;
        if (e.type === 'up' || e.type === 'resumed') settle(undefined, peer);
        else if (e.type === 'gone')
          settle(
            new TransportError('ERR_UNKNOWN_PEER', `peer ${peer} is gone: ${e.error?.message ?? ''}`, {
              cause: e.error,
              retryable: true,
            }),
          );
      }),
    ],
  );
}
