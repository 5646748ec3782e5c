/**
 * The node's view of peer lifecycle, over its messenger: waiting for a peer whose link is coming
 * back (an attach or a ticket open toward a reconnecting peer waits instead of failing at once),
 * `ready(address)`, and the `onPeerState` / `peerEvents` feeds. A messenger made by
 * `createMessenger` has all of them; another one (a test double) gets today's behaviour for the
 * wait and a clear error for the rest.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import type {
  Messenger,
  PeerEvent,
  PeerEventsOptions,
  PeerId,
  PeerStateEvent,
  WaitOptions,
} from '../messenger/types.ts';
import { StreamError, type StreamErrorCode } from './errors.ts';

/** Codes of the messenger's wait that keep their meaning for a stream operation. */
const KEPT: ReadonlySet<string> = new Set<StreamErrorCode>(['ERR_UNKNOWN_PEER', 'ERR_ABORTED', 'ERR_CLOSED']);

/**
 * The connected peer `peer` (worker id, hex): at once if it is connected; if its link was lost and
 * a dial is re-dialling it (it is `reconnecting`), once it is back — at most `timeoutMs` (defaults
 * to 10,000 ms), abortable with `signal`. Rejects `ERR_UNKNOWN_PEER` (a `StreamError`) at once if
 * it is not connected and nothing re-dials it, and if it is gone or not back in time;
 * `ERR_ABORTED` on abort.
 */
export function waitForPeer(messenger: Messenger, peer: PeerId, options: WaitOptions = {}): Promise<PeerId> {
  if (messenger.peer(peer) !== undefined) return Promise.resolve(peer);
  if (messenger.waitForPeer === undefined)
    return Promise.reject(
      new StreamError('ERR_UNKNOWN_PEER', `no connected peer has worker id ${peer}; connect to it first`),
    );
  return messenger.waitForPeer(peer, options).catch((error: unknown) => {
    if (error instanceof LanemuxError && KEPT.has(error.code) && !(error instanceof StreamError))
      throw new StreamError(error.code as StreamErrorCode, error.message, {
        cause: error,
        retryable: error.retryable,
      });
    throw error;
  });
}

/** `node.ready(address)`: the peer id once a link to `address` is up (see `Messenger.ready`). */
export async function readyAt(messenger: Messenger, address: string, options: WaitOptions = {}): Promise<PeerId> {
  if (messenger.ready === undefined) throw unsupported('ready');
  return (await messenger.ready(address, options)).id;
}

/** `node.onPeerState(listener)` (see `Messenger.onPeerState`). */
export function onPeerState(messenger: Messenger, listener: (event: PeerStateEvent) => void): () => void {
  if (messenger.onPeerState === undefined) throw unsupported('onPeerState');
  return messenger.onPeerState(listener);
}

/** `node.peerEvents(options)` (see `Messenger.peerEvents`). */
export function peerEvents(messenger: Messenger, options?: PeerEventsOptions): AsyncIterableIterator<PeerEvent> {
  if (messenger.peerEvents === undefined) throw unsupported('peerEvents');
  return messenger.peerEvents(options);
}

function unsupported(what: string): StreamError {
  return new StreamError(
    'ERR_TRANSPORT_ERROR',
    `the messenger this node rides has no ${what}: use one made by createMessenger`,
  );
}
