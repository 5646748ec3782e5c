/**
 * The messenger a client or a node builds for itself from its `transports` (when it is given no
 * `messenger`): the HELLO keys it advertises, its lanes and limits, and one runtime for the whole node.
 */
import type { Authenticate } from '../transport/auth.ts';
import { createMessenger } from '../messenger/messenger.ts';
import type { Messenger, PeerInfo } from '../messenger/types.ts';
import type { ResolvedMuxConfig } from '../mux/config.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY } from '../wire/constants.ts';
import type { ClientOptions } from './lanemux-client.ts';
import { DRAIN_KEY } from './drain-notice.ts';
import { RESUME_KEY, resolveResume } from './resume-options.ts';

/** What a node adds to a client's messenger: who authenticates inbound links, and more HELLO keys. */
export interface NodeMessengerExtras {
  readonly authenticate?: Authenticate;
  /** More transport keys to advertise (the per-stream path's). */
  readonly keys?: readonly string[];
}

/** Build the messenger of a client or node; `isBusy` tells it which links carry live streams. */
export function openNodeMessenger(
  options: ClientOptions,
  config: ResolvedMuxConfig,
  runtime: Runtime,
  isBusy: (peer: PeerInfo) => boolean,
  extras: NodeMessengerExtras = {},
): Promise<Messenger> {
  // Every node hears and sends draining notices (docs/protocol.md §8.4).
  const keys: string[] = [DRAIN_KEY];
  if (config.enabled) keys.push(MESSENGER_MUX_KEY);
  if (config.enabled && resolveResume(options.resume, config.slotByteBudget) !== null) keys.push(RESUME_KEY);
  if (extras.keys !== undefined) keys.push(...extras.keys);
  return createMessenger({
    transports: options.transports!,
    transportKeys: keys,
    // Every link is health-checked (a dead one closes, so idle sockets cannot pin a peer place); the
    // mux adds its own check for peers with live slots (epoch death on failure).
    ...(options.lanes !== undefined ? { lanes: options.lanes } : {}),
    ...(options.maxMessageSize !== undefined ? { maxMessageSize: options.maxMessageSize } : {}),
    ...(options.workerId !== undefined ? { workerId: options.workerId } : {}),
    ...(extras.authenticate !== undefined ? { authenticate: extras.authenticate } : {}),
    // Links with live streams are never idle-closed or evicted.
    isBusy,
    ...(options.credential !== undefined ? { credential: options.credential } : {}),
    // The sender toward us keeps at most this many bytes of mux data unreleased (docs/protocol.md §3.3).
    ...(config.enabled ? { receiveWindow: config.peerByteBudget } : {}),
    // One clock for the whole node: the messenger, its transport and the adapters' connections too.
    runtime,
  });
}
