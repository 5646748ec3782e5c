/**
 * `lanemux/transport/ws-server` in a browser or worker bundle: importing it throws
 * `ERR_UNSUPPORTED_RUNTIME` (a page cannot accept WebSocket connections). The export keeps the real
 * module's name so the import links and the evaluation error is what shows.
 *
 * @packageDocumentation
 */
import { unsupportedRuntime } from './unsupported.ts';

const error = unsupportedRuntime('ws-server', "a WebSocket server (Node's http module and the ws package)");

/** Throws: a browser cannot accept WebSocket connections. */
export function webSocketServerTransport(_options?: unknown): never {
  throw error;
}

throw error;
