/**
 * What a WebSocket dial that never reached a lanemux server says to its caller: refused (nothing
 * listens), an HTTP answer instead of the upgrade (a wrong path is a 404; anything else is not a
 * WebSocket endpoint), a TLS refusal, no answer within the timeout, or a socket the server closed
 * before saying anything. Runtime-agnostic: it reads only the `error` event's message and code,
 * which `ws` (Node) fills in and browsers leave empty on purpose.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { TransportError } from '../transport/errors.ts';

/** What the runtime reported about a socket that did not open (from its `error` event). */
export interface OpenFailureDetail {
  /** The error's message; '' when the runtime gives none (browsers). */
  readonly message: string;
  /** A system or TLS error code when the runtime has one (`ECONNREFUSED`, `CERT_HAS_EXPIRED`). */
  readonly code: string | undefined;
  readonly cause: unknown;
}

/** TLS error codes of Node (`ws` on `wss:`: `CERT_HAS_EXPIRED`, `DEPTH_ZERO_SELF_SIGNED_CERT`, …): a retry cannot help. */
const TLS_CODE = /^(?:ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/;

/** The `host:port` and path of an address (the address itself and '/' when it does not parse). */
function parts(address: string): { host: string; path: string } {
  try {
    const u = new URL(address);
    return { host: u.host, path: u.pathname };
  } catch {
    return { host: address, path: '/' };
  }
}

/** An HTTP status in an upgrade refusal: `ws` says "Unexpected server response: 404", others "HTTP 404" or "status 404". */
function httpStatus(message: string): number | undefined {
  const m =
    /Unexpected server response: (\d{3})/.exec(message) ??
    /\b(?:HTTP|status(?: code)?)\D{0,16}([1-5]\d\d)\b/i.exec(message);
  return m === null ? undefined : Number(m[1]);
}

/**
 * The `ERR_CONNECT` for a socket that never opened. `attempts` > 0: a reconnecting dial gave up
 * after that many consecutive failures.
 */
export function describeOpenFailure(
  address: string,
  detail: OpenFailureDetail | undefined,
  timeoutMs: number,
  attempts = 0,
): LanemuxError {
  const raw = detail?.message ?? '';
  const code = detail?.code;
  const cause = detail?.cause;
  const after = attempts > 0 ? ` (${attempts} consecutive attempts failed; giving up)` : '';
  const said = raw === '' ? '' : ` (${raw})`;
  const fail = (text: string, retryable: boolean): LanemuxError =>
    new TransportError('ERR_CONNECT', `websocket to ${address}: ${text}${after}`, { retryable, cause });

  if (raw === 'TIMEOUT')
    return fail(
      `the WebSocket did not open within ${timeoutMs} ms (connectionTimeout): the server accepted no upgrade in time`,
      true,
    );
  const { host, path } = parts(address);
  if (code === 'ECONNREFUSED' || /ECONNREFUSED|connection refused/i.test(raw))
    return fail(`connection refused: nothing listens at ${host}${said}`, true);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || /ENOTFOUND|EAI_AGAIN|getaddrinfo/i.test(raw))
    return fail(`cannot resolve the host ${host}${said}`, true);
  if ((code !== undefined && TLS_CODE.test(code)) || /certificate/i.test(raw)) {
    return fail(
      `the server's TLS certificate was refused${said}; check the CA the runtime trusts and the host name`,
      false,
    );
  }
  const status = httpStatus(raw);
  if (status === 404) {
    return fail(
      `the server answered HTTP 404: nothing serves WebSockets at the path "${path}" (is the path right? a lanemux ws-server listens at "/lanemux" by default)`,
      false,
    );
  }
  if (status !== undefined) {
    // Overload and gateway answers can pass; any other answer will be given again.
    const transient = status >= 500 || status === 408 || status === 429;
    return fail(
      `the server answered HTTP ${status} instead of upgrading to WebSocket: this is not a lanemux WebSocket endpoint, or something in front of it refused`,
      transient,
    );
  }
  if (code === 'ECONNRESET' || /ECONNRESET|socket hang up/i.test(raw)) {
    return fail(
      `the server closed the connection during the WebSocket upgrade: it does not speak WebSocket at this address${said}`,
      true,
    );
  }
  if (raw === '') {
    // Browsers hide why on purpose (no network detail reaches the page); the console has it.
    return fail(
      `the WebSocket did not open and the runtime gave no reason: nothing listens there, the path is wrong, or it is not a WebSocket server (the browser console says which)`,
      true,
    );
  }
  return fail(`the WebSocket did not open${said}`, true);
}

/** WebSocket close codes after which a server may well take the next try (RFC 6455 §7.4.1, IANA). */
const TRANSIENT_CLOSE: ReadonlySet<number> = new Set([1011, 1012, 1013, 1014]);

/**
 * The error for a dial's socket that the server closed before sending a single message, or
 * undefined when that close is no evidence: 1005/1006 (no close frame: an abort, the network, an
 * evicted handshake) and lanemux's own codes (4000–4999, 1009) are judged by the caller as usual.
 * A lanemux server always answers a HELLO (or says why in a GOAWAY) before it closes with anything else.
 */
export function describeEarlyClose(address: string, code: number, reason: string): LanemuxError | undefined {
  if (code === 1005 || code === 1006 || code === 1009 || (code >= 4000 && code <= 4999)) return undefined;
  return new TransportError(
    'ERR_CONNECT',
    `websocket to ${address}: the server accepted the WebSocket and closed it (${code}${reason ? `: ${reason}` : ''}) before answering the HELLO: this is not a lanemux server`,
    { retryable: TRANSIENT_CLOSE.has(code) },
  );
}
