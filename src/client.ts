/**
 * `lanemux/client`: what a browser page uses — a consumer-only node (`createClient`) that calls
 * `client.stream`, reads and cancels streams, creates anchors and tickets, over the WebSocket client
 * or WebTransport with fallback. Nothing of the producer side (senders, MPSC, `serve`, relay, drain,
 * discovery dialling) and no server-only adapter (ws-server, TCP, WebTransport server) is reachable
 * from here, so a bundler leaves them out; a page that also produces imports `createNode` from `lanemux`.
 *
 * @packageDocumentation
 */
export { LanemuxError, isLanemuxError } from './errors.ts';
export { createClient, LanemuxClient } from './stream/lanemux-client.ts';
export type { ClientOptions } from './stream/lanemux-client.ts';
export { StreamAnchor } from './stream/anchor.ts';
export type { AnchorConsumer, AnchorConsumption } from './stream/anchor.ts';
export { StreamError, ResumeFailedError } from './stream/errors.ts';
export type { StreamErrorCode, ResumeFailure } from './stream/errors.ts';
export { CallStream } from './stream/call.ts';
export type { CallOptions } from './stream/call.ts';
export { CallError } from './stream/call-envelope.ts';
export type { CallErrorCode } from './stream/call-envelope.ts';
export { parseHandle, formatHandle } from './stream/handle.ts';
export type { AnchorHandle } from './stream/handle.ts';
export { parseTicket } from './stream/ticket.ts';
export type { StreamOpenTicket } from './stream/ticket.ts';
export { ConfigError } from './mux/config.ts';
export { MuxError } from './mux/errors.ts';
export type { Messenger, PeerInfo, PeerId } from './messenger/types.ts';
export { webSocketClientTransport } from './adapters/websocket.ts';
export type { WebSocketClientTransportOptions } from './adapters/websocket.ts';
export { browserClientTransport } from './adapters/browser-client.ts';
export type {
  BrowserClientTransport,
  BrowserClientTransportOptions,
  BrowserTransportKind,
  TransportInUseEvent,
} from './adapters/browser-client.ts';
