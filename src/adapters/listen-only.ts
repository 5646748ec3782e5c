/**
 * What the listen-only WebSocket server adapters (Cloudflare Workers, Deno, Bun) share: they refuse
 * to dial, close every connection they accepted when the node closes, and close sockets that the
 * runtime may already be closing. Runtime-neutral: the runtime-specific parts stay in each adapter.
 *
 * @packageDocumentation
 */
import { TransportError } from '../transport/errors.ts';
import { failDial } from '../transport/fail-dial.ts';
import type { DialEvents, DialHandle, DialRequest } from '../transport/port.ts';
import type { MessageSocketConnection } from './message-socket-conn.ts';

/**
 * A dial refused with `ERR_UNSUPPORTED_ADDRESS` (on the next microtask, as every dial fails):
 * `server` names the adapter in the message, e.g. `'Deno WebSocket server'`.
 */
export function refuseDial(server: string, request: DialRequest, events: DialEvents): DialHandle {
  return failDial(
    events,
    new TransportError(
      'ERR_UNSUPPORTED_ADDRESS',
      `the ${server} adapter does not dial (${request.address}); use webSocketClientTransport`,
    ),
  );
}

/** Close every accepted connection with `ERR_CLOSED` and wait until each has finished closing. */
export async function closeConnections(conns: Iterable<MessageSocketConnection>): Promise<void> {
  const err = new TransportError('ERR_CLOSED', 'websocket server closing');
  await Promise.all([...conns].map((c) => c.closeAndWait(err)));
}

/** Run a socket's close or terminate, ignoring the throw of a socket that is already closing or closed. */
export function quietly(close: () => void): void {
  try {
    close();
  } catch {
    // Already closing.
  }
}
