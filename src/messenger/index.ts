/**
 * The messenger: active messages over the transport port. See `messenger.ts` and docs/protocol.md.
 *
 * @packageDocumentation
 */
export { createMessenger } from './messenger.ts';
export type { MessengerOptions, HealthCheckOptions } from './options.ts';
export type {
  Admission,
  ConnectOptions,
  DialEndedEvent,
  HandleOptions,
  MessageHandler,
  Messenger,
  MessengerErrorEvent,
  MessengerStats,
  PeerEvent,
  PeerEventsOptions,
  PeerEventsOverflow,
  PeerGoneEvent,
  PeerId,
  PeerInfo,
  PeerStateEvent,
  PeerStateType,
  ReconnectOption,
  ReconnectOptions,
  RequestHandler,
  UnsignalledRequestHandler,
  WaitOptions,
} from './types.ts';
export { MessengerError, RemoteError } from './errors.ts';
export { ConfigError } from '../errors.ts';
export type { ConfigErrorCode } from '../errors.ts';
export type { MessengerErrorCode } from './errors.ts';
export { BATCH_ENVELOPE_BYTES, BATCH_HANDLER_NAMES, MAX_HANDLER_NAME_BYTES, isReservedName } from './envelope.ts';
/** The transport key a messenger advertises to carry mux streams (pass it in `transportKeys`). */
export { MESSENGER_MUX_KEY } from '../wire/constants.ts';
