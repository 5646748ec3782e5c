/**
 * Authentication of inbound links: what a server adapter's `authenticate` hook sees, and what a
 * dialler presents. The hook runs once per link, on the lane-0 HELLO, before the node answers it or
 * learns anything else from the peer; the lanes that follow join by the claim token of the lane-0
 * answer (docs/security.md).
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';

/** What the transport knows of an inbound peer when its lane-0 HELLO arrives. */
export interface AuthRequest {
  /** The adapter that accepted the connection (`tcp`, `ws-server`, `deno-ws`, `webtransport`, …). */
  readonly transport: string;
  /** The remote endpoint as the adapter names it (`tcp://10.0.0.7:51234`, `ws://…`). */
  readonly remote: string;
  /** The credential the dialler put in its HELLO (a token, a signed blob), if any. At most 8 KiB. */
  readonly credential: string | undefined;
  /** The worker id (16 hex digits) the peer claims. */
  readonly worker: string;
  /** For WebSocket and WebTransport: the upgrade request (URL with its query, headers, cookies). */
  readonly request: UpgradeRequest | undefined;
}

/** The HTTP request that opened a WebSocket or WebTransport session. */
export interface UpgradeRequest {
  /** The full request URL, query included. */
  readonly url: string;
  /** Request headers, names in lower case (`cookie`, `authorization`, `origin`, …). */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Decide whether a peer may link: return its identity (any non-empty string the application
 * recognises, e.g. a user or service name), or `null` / `undefined` to refuse. A throw also refuses.
 * The dialler is told `ERR_UNAUTHENTICATED` (not retryable); no other link is disturbed. The hook has
 * the rest of the hello deadline to answer.
 */
export type Authenticate = (request: AuthRequest) => string | null | undefined | Promise<string | null | undefined>;

/**
 * What a dialler presents in its HELLO: a fixed string, or a function called before every connect
 * and reconnect (so a browser can refresh a short-lived token). At most 8 KiB.
 */
export type CredentialSource = string | (() => string | Promise<string>);

/** Longest credential a HELLO carries (defined once in wire/constants.ts). */
import { MAX_CREDENTIAL_LENGTH } from '../wire/constants.ts';
export { MAX_CREDENTIAL_LENGTH };

/** Option schema of an adapter's `authenticate` (zod/mini shape fragment). */
export const authenticateOption = {
  authenticate: z.optional(z.custom<Authenticate>((v) => typeof v === 'function', 'authenticate must be a function')),
};

/** Option schema of an adapter's `credential` (zod/mini shape fragment). */
export const credentialOption = {
  credential: z.optional(
    z.custom<CredentialSource>(
      (v) => typeof v === 'function' || (typeof v === 'string' && v.length <= MAX_CREDENTIAL_LENGTH),
      `credential must be a function or a string of at most ${MAX_CREDENTIAL_LENGTH} characters`,
    ),
  ),
};

/** Copy of a header list with lower-case names (bounded by the HTTP server's own header limits). */
export function headerRecord(
  headers: Iterable<readonly [string, string]> | Readonly<Record<string, string | string[] | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (Symbol.iterator in headers) {
    for (const [k, v] of headers as Iterable<readonly [string, string]>) out[k.toLowerCase()] = v;
    return out;
  }
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}
