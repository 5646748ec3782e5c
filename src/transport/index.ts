/**
 * `lanemux/transport`: what an adapter author needs — the transport port (`TransportAdapter`,
 * `Connection`, …), its error class and codes, framing and admission. The adapters themselves are
 * entries of their own (`lanemux/transport/memory`, `lanemux/transport/tcp`, …), so a bundle pulls in
 * only the ones it imports.
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
export type { PerStreamConnection, PerStreamSink, PerStreamTransport } from './per-stream-port.ts';
export { TCP_STREAM_KEY } from '../wire/constants.ts';
/** The clock and timers an adapter gets in `ListenHost.runtime` and `DialRequest.runtime`. */
export type { Runtime, TimerHandle } from '../runtime/runtime.ts';
