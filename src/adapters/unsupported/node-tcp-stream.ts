/**
 * `lanemux/transport/tcp-stream` (the per-stream legacy path) in a browser or worker bundle:
 * importing it throws `ERR_UNSUPPORTED_RUNTIME`. The exports keep the real module's names so the
 * import links and the evaluation error is what shows.
 *
 * @packageDocumentation
 */
import { unsupportedRuntime } from './unsupported.ts';

const error = unsupportedRuntime('tcp-stream', "Node's TCP sockets (node:net)");

/** The per-stream transport key, as in the real module. */
export { TCP_STREAM_KEY as TCP_STREAM_TRANSPORT_KEY } from '../../wire/constants.ts';
/** Bytes of the per-connection preface, as in the real module. */
export const TCP_STREAM_PREFACE_BYTES = 16;
/** Bytes of each frame's length prefix, as in the real module. */
export const TCP_STREAM_PREFIX_BYTES = 4;

/** Throws: TCP sockets do not exist here. */
export function tcpStreamTransport(_options?: unknown): never {
  throw error;
}

throw error;
