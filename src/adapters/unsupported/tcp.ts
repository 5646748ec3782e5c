/**
 * `lanemux/transport/tcp` in a browser or worker bundle (the `browser` and `default` export
 * conditions): importing it throws `ERR_UNSUPPORTED_RUNTIME`. The export keeps the real modules'
 * name so the import links and the evaluation error, not a missing-export error, is what shows.
 *
 * @packageDocumentation
 */
import { unsupportedRuntime } from './unsupported.ts';

const error = unsupportedRuntime('tcp', 'TCP sockets (Node, Deno or Bun)');

/** Throws: TCP sockets do not exist here. */
export function tcpTransport(_options?: unknown): never {
  throw error;
}

throw error;
