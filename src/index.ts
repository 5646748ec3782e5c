/**
 * lanemux: thousands of small ordered streams (LLM tokens above all) between servers and
 * browsers over one connection per peer. Every stream to a peer is a slot on that connection;
 * each pass's records for the peer are packed into one batch (one write); per-slot credit and
 * byte budgets bound memory so one slow reader never stalls the others.
 *
 * Subpaths: `lanemux/client` (a browser page's entry: `connect` to one server, calls, anchors,
 * tickets, resume, over WebSocket or WebTransport with fallback), `lanemux/messenger` (build a messenger yourself; `MESSENGER_MUX_KEY`),
 * `lanemux/transport/*` (one adapter each: `tcp`, `ws-server`, `websocket`, `webtransport`, `memory`,
 * …), `lanemux/transport` (the port, for adapter authors), `lanemux/wire` (the byte-exact codec),
 * `lanemux/credit` (the credit model).
 *
 * @packageDocumentation
 */
export { LanemuxError, isLanemuxError } from './errors.ts';
export { createNode, LanemuxNode } from './stream/node.ts';
export type { NodeOptions, AttachOptions, DrainOptions, DrainSummary } from './stream/node.ts';
export { createClient, LanemuxClient } from './stream/lanemux-client.ts';
export type { ClientOptions } from './stream/lanemux-client.ts';
export type { NodeLogger } from './metrics/mux-metrics.ts';
export type { OpenOptions } from './stream/producer.ts';
export type { GapMarker, OverrunPolicy } from './stream/live-feed.ts';
export { StreamAnchor } from './stream/anchor.ts';
export type { AnchorConsumer, AnchorConsumption } from './stream/anchor.ts';
export { StreamSender } from './stream/sender.ts';
export { MpscAnchor } from './stream/mpsc-anchor.ts';
export type { MpscEvent, MpscAnchorOptions } from './stream/mpsc-anchor.ts';
export { MpscSender } from './stream/mpsc-sender.ts';
export { relay, openRelay } from './stream/relay.ts';
export type { Relay, RelayOptions, OpenRelayOptions } from './stream/relay.ts';
export { StreamError, ResumeFailedError } from './stream/errors.ts';
export { CallStream } from './stream/call.ts';
export type { CallOptions } from './stream/call.ts';
export { CallError } from './stream/call-envelope.ts';
export type { CallErrorCode } from './stream/call-envelope.ts';
export type { CallContext, CallHandler, ServeOptions } from './stream/serve.ts';
export type { StreamErrorCode, ResumeFailure } from './stream/errors.ts';
export type { ResumeOptions, HistoryOptions } from './stream/resume-options.ts';
export type { ReattachOptions } from './stream/reattach.ts';
export type { NodeDiscoveryOptions, NodeRegistration } from './stream/discovery-options.ts';
export { parseHandle, formatHandle } from './stream/handle.ts';
export type { AnchorHandle } from './stream/handle.ts';
export { parseTicket } from './stream/ticket.ts';
export type { StreamOpenTicket } from './stream/ticket.ts';
export { MUX_DEFAULTS, ConfigError } from './mux/config.ts';
export type { MuxConfig, FlushPolicy } from './mux/config.ts';
export { MuxError } from './mux/errors.ts';
export type { Retirement } from './mux/egress-slot.ts';
export { MuxMetrics } from './metrics/mux-metrics.ts';
export { systemRuntime } from './runtime/runtime.ts';
export type { Runtime } from './runtime/runtime.ts';
export type { Messenger, PeerInfo, PeerId, DialEndedEvent, PeerStateEvent } from './messenger/types.ts';
