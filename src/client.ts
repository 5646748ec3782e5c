/**
 * `lanemux/client`: what a browser page imports — `connect(url)` to its one server, then
 * `client.stream(method, request)` to call a served method and read its answer, `client.anchor()`
 * and `client.ticket(anchor)` for producers that attach or open with a ticket; reading, cancelling,
 * and resuming across a lost connection. Over WebSocket (the default) or WebTransport with a
 * WebSocket fallback. Nothing of a node (peer table, listeners, the producer side) is here, so the
 * page's bundle stays small; `createNode` and `createClient` from `lanemux` are the full nodes.
 *
 * @packageDocumentation
 */
export { connect, Client } from './client/client.ts';
export type { ClientOptions, StreamCallOptions } from './client/client.ts';
export { ClientStream } from './client/stream.ts';
export { webSocketCarrier } from './client/carrier.ts';
export type { Carrier, CarrierEvents, CarrierFactory, WebSocketConstructor } from './client/carrier.ts';
export { LanemuxError, isLanemuxError } from './errors.ts';
export { StreamError, ResumeFailedError } from './stream/errors.ts';
export type { StreamErrorCode, ResumeFailure } from './stream/errors.ts';
export { CallError } from './stream/call-envelope.ts';
export type { CallErrorCode } from './stream/call-envelope.ts';
export { webTransportCarrier } from './client/webtransport.ts';
export type {
  WebTransportCarrierOptions,
  WebTransportConstructor,
  WebTransportHash,
  WebTransportHashSource,
} from './client/webtransport.ts';
export { browserCarrier } from './client/fallback.ts';
export type { BrowserCarrierOptions, TransportEvent } from './client/fallback.ts';
