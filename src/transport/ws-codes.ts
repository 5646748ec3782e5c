/**
 * WebSocket close codes used by both WebSocket adapters (private range 4000–4999, RFC 6455 §7.4.2).
 * The GOAWAY message carries the precise reason; the close code is the fallback a browser sees when
 * the GOAWAY is lost, and it tells a reconnecting client whether trying again can help.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { LanemuxError as LanemuxErrorClass } from '../errors.ts';
import { TransportError } from './errors.ts';
import { truncate } from './hello.ts';

const CODE_TO_CLOSE: Readonly<Record<string, number>> = {
  ERR_CLOSED: 1001, // going away
  ERR_PEER_GONE: 4000,
  ERR_MALFORMED_ENVELOPE: 4001,
  ERR_VERSION_MISMATCH: 4002,
  ERR_FRAME_TOO_LARGE: 4003,
  ERR_HANDSHAKE: 4004,
  ERR_HEALTH_CHECK_FAILED: 4005,
  ERR_TOO_MANY_PEERS: 4006,
  ERR_PROTOCOL: 4007,
  ERR_DUPLICATE_LINK: 4008,
  ERR_UNAUTHENTICATED: 4009,
  ERR_WORKER_ID_IN_USE: 4010,
  ERR_EVICTED: 4011,
  ERR_IDLE: 4012,
  ERR_FRAME_DEADLINE: 4013,
};

const CLOSE_TO_CODE: ReadonlyMap<number, string> = new Map([
  ...Object.entries(CODE_TO_CLOSE).map(([k, v]) => [v, k] as const),
  // RFC 6455 "message too big": what `ws` sends when a message exceeds maxPayload.
  [1009, 'ERR_FRAME_TOO_LARGE'] as const,
]);

/** Close codes after which a client must not reconnect (the server would refuse it again). */
export const TERMINAL_CLOSE_CODES: ReadonlySet<number> = new Set([4001, 4002, 4004, 4008, 4009]);

/** WebSocket close code and reason (≤ 123 bytes of UTF-8) for an error. */
export function closeFrameFor(error: LanemuxError): { code: number; reason: string } {
  const code = CODE_TO_CLOSE[error.code] ?? 4007;
  // The close reason is limited to 123 bytes; keep it ASCII-safe and short.
  const reason = truncate(`${error.code}: ${error.message}`.replace(/[^\x20-\x7e]/g, '?'), 120);
  return { code, reason };
}

/** The error to report for a WebSocket closed by the peer with `code`/`reason`. */
export function errorForClose(code: number, reason: string, remote: string): LanemuxError {
  const mapped = CLOSE_TO_CODE.get(code);
  const text = `websocket to ${remote} closed (${code}${reason ? `: ${reason}` : ''})`;
  if (mapped === undefined || mapped === 'ERR_CLOSED' || mapped === 'ERR_PEER_GONE') {
    return new TransportError('ERR_PEER_GONE', text, { retryable: true });
  }
  if (mapped === 'ERR_HEALTH_CHECK_FAILED') return new LanemuxErrorClass(mapped, text, { retryable: true });
  return new LanemuxErrorClass(mapped, text, { retryable: !TERMINAL_CLOSE_CODES.has(code) });
}
