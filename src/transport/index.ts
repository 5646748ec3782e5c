/**
 * The transport port and its runtime-agnostic adapters. Node-only adapters live in their own entry
 * points (`node-tcp.ts`, `ws-server.ts`) so browser bundles never see `node:*`.
 *
 * @packageDocumentation
 */
export {
  DEFAULT_HIGH_WATER_MARK,
  DEFAULT_MAX_MESSAGE_SIZE,
  DEFAULT_MAX_PENDING_BYTES,
  HELLO_FRAME_LIMIT,
  MAX_LANES,
  PROTOCOL_VERSION,
} from './port.ts';
export type {
  Admission,
  CloseMode,
  Connection,
  ConnectionReceiver,
  DialEvents,
  DialHandle,
  DialRequest,
  LinkHandler,
  LinkReceiver,
  ListenHost,
  LocalIdentity,
  PeerIdentity,
  PeerLink,
  Transport,
  TransportAdapter,
} from './port.ts';
export { TransportError } from './errors.ts';
export type { TransportErrorCode } from './errors.ts';
export { AdmissionGate } from './admission.ts';
export type { AdmissionLimits, AdmissionSink } from './admission.ts';
export { FrameDecoder, FRAME_PREFIX_BYTES, writeFrame } from './frame.ts';
export { createTransport } from './transport.ts';
export type { TransportOptions } from './transport.ts';
export { createMemoryNetwork, memoryTransport } from './memory.ts';
export type { MemoryNetwork, MemoryTransportOptions } from './memory.ts';
export { webSocketClientTransport } from './websocket.ts';
export type { WebSocketClientTransportOptions, WebSocketConstructor } from './websocket.ts';
