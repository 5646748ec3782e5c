/**
 * Options and addresses shared by the TCP adapters of Node, Deno and Bun (`node-tcp.ts`, `deno-tcp.ts`,
 * `bun-tcp.ts`) and the WebSocket server adapters of Deno and Bun, so they accept exactly what the Node
 * adapters accept (`node-tcp.ts`, `ws-server.ts`) and print the same addresses (`tcp://host:port`,
 * `tls://host:port` with TLS, `ws://host:port/path`).
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { ConfigError, type LanemuxError } from '../errors.ts';
import { authenticateOption, credentialOption, type Authenticate, type CredentialSource } from '../transport/auth.ts';
import { TransportError, asTransportError, describeThrown } from '../transport/errors.ts';
import { admissionSchema } from '../transport/options.ts';
import { parseOptions } from '../validate.ts';
import { int } from '../validate.ts';

/** PEM text, as a string or its bytes (e.g. `fs.readFileSync('cert.pem')`). */
export type PemInput = string | Uint8Array;

/**
 * TLS of the TCP adapters (`tcpTransport`, `denoTcpTransport`, `bunTcpTransport`): one option shape
 * for the listening and the dialling side, in all three runtimes. Keys and certificates are PEM.
 */
export interface SocketTlsOptions {
  /** Private key, PEM. Listening: the server's key (required). Dialling: the client certificate's key (mutual TLS). */
  readonly key?: PemInput;
  /** Certificate chain, PEM, leaf first. Listening: the server's (required). Dialling: the client certificate (with `key`). */
  readonly cert?: PemInput;
  /**
   * Certificates to trust, PEM (one or several). Dialling: the CAs of the servers; Node and Bun then
   * trust only these, Deno trusts them in addition to its root store. Listening with `requestCert`:
   * the CAs of client certificates. Defaults to the runtime's root store.
   */
  readonly ca?: PemInput | readonly PemInput[];
  /** Listening: ask every dialler for a client certificate, verified against `ca`. Not on Deno. Defaults to false. */
  readonly requestCert?: boolean;
  /**
   * Refuse a peer whose certificate does not verify: the server (dialling), or with `requestCert` a
   * client without a valid certificate (listening). Deno cannot turn this off. Defaults to true.
   */
  readonly rejectUnauthorized?: boolean;
  /** Dialling: the name sent in SNI and checked against the server's certificate. Not on Deno. Defaults to the address's host. */
  readonly servername?: string;
  /**
   * Listening: a connection must finish its TLS handshake within this, else it is dropped (it is not
   * a lane connection yet, so the hello deadline does not cover it; on Deno it is only never handed
   * over, see `deno-tcp.ts`). Dialling, the handshake is part of `connectTimeoutMs`. Defaults to 10,000 ms.
   */
  readonly handshakeTimeoutMs?: number;
}

/** Options of the TCP adapters of Node (`tcpTransport`), Deno and Bun. */
export interface SocketTcpTransportOptions {
  /** Listen on this host. Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Listen on this port; 0 picks a free one. Defaults to 0. */
  readonly port?: number;
  /** Whether to listen at all (a pure client sets false). Defaults to true. */
  readonly listen?: boolean;
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** Time allowed for one lane's TCP connect (and TLS handshake). Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /** After a graceful close, close the socket if the peer has not closed within this. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
  /**
   * Speak TLS on every connection of this adapter. Its addresses are then `tls://host:port` (it
   * listens on and dials only those), not `tcp://`: an address says whether it needs TLS, so a
   * plaintext dialler never reaches a TLS port by mistake (an opaque handshake failure) and a TLS
   * dialler is never quietly downgraded by a peer advertising `tcp://`. A node that speaks both
   * installs two adapters. Listening needs `key` and `cert`. Defaults to none (plain TCP).
   */
  readonly tls?: SocketTlsOptions;
  /**
   * Credential the dials of this adapter present in their lane-0 HELLO (a string of at most 8 KiB,
   * or a function called before every connect). Defaults to the messenger's `credential`.
   */
  readonly credential?: CredentialSource;
  /**
   * Decides whether a peer that connected to this adapter may link (its lane-0 HELLO, before it is
   * answered). Defaults to the messenger's `authenticate`; with neither, peers are not authenticated.
   */
  readonly authenticate?: Authenticate;
}

const pemSchema = z.union([z.string().check(z.minLength(1)), z.instanceof(Uint8Array)]);

const tlsSchema = z.object({
  key: z.optional(pemSchema),
  cert: z.optional(pemSchema),
  ca: z.optional(z.union([pemSchema, z.array(pemSchema).check(z.minLength(1))])),
  requestCert: z._default(z.boolean(), false),
  rejectUnauthorized: z._default(z.boolean(), true),
  servername: z.optional(z.string().check(z.minLength(1))),
  handshakeTimeoutMs: z._default(int(1, 600_000), 10_000),
});

export const tcpOptionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  listen: z._default(z.boolean(), true),
  ...admissionSchema,
  connectTimeoutMs: z._default(int(1, 600_000), 10_000),
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  tls: z.optional(tlsSchema),
  ...credentialOption,
  ...authenticateOption,
});

/** TLS settings after validation: PEM as text, `ca` as a list. */
export interface TlsSettings {
  readonly key: string | undefined;
  readonly cert: string | undefined;
  readonly ca: readonly string[] | undefined;
  readonly requestCert: boolean;
  readonly rejectUnauthorized: boolean;
  readonly servername: string | undefined;
  readonly handshakeTimeoutMs: number;
}

/** Validated options of a TCP adapter. */
export type TcpOptions = Omit<z.output<typeof tcpOptionsSchema>, 'tls'> & {
  /** TLS settings, or undefined for plain TCP. */
  readonly tls: TlsSettings | undefined;
  /** `tls` with TLS, else `tcp`: the scheme of every address of the adapter. */
  readonly scheme: 'tcp' | 'tls';
};

/**
 * Validate the options of a TCP adapter (`where` names it in errors): the schema, then the rules
 * across fields (a TLS listener needs `key` and `cert`; `key` and `cert` come together).
 */
export function parseTcpOptions(input: unknown, where: string): TcpOptions {
  const o = parseOptions(tcpOptionsSchema, input, where);
  const t = o.tls;
  if (t === undefined) return { ...o, tls: undefined, scheme: 'tcp' };
  if ((t.key === undefined) !== (t.cert === undefined)) {
    throw new ConfigError(
      t.key === undefined ? 'tls.key' : 'tls.cert',
      'tls.key and tls.cert go together (a certificate and its private key)',
      { fields: ['tls.key', 'tls.cert'], where },
    );
  }
  if (o.listen && t.key === undefined) {
    throw new ConfigError('tls.key', 'a TLS listener needs tls.key and tls.cert (or set listen: false to only dial)', {
      fields: ['tls.key', 'tls.cert'],
      where,
    });
  }
  const text = (v: PemInput): string => (typeof v === 'string' ? v : new TextDecoder().decode(v));
  const ca =
    t.ca === undefined
      ? undefined
      : (Array.isArray(t.ca) ? (t.ca as readonly PemInput[]) : [t.ca as PemInput]).map(text);
  return {
    ...o,
    scheme: 'tls',
    tls: {
      key: t.key === undefined ? undefined : text(t.key),
      cert: t.cert === undefined ? undefined : text(t.cert),
      ca,
      requestCert: t.requestCert,
      rejectUnauthorized: t.rejectUnauthorized,
      servername: t.servername,
      handshakeTimeoutMs: t.handshakeTimeoutMs,
    },
  };
}

/**
 * Why a TLS dial failed, clearly: a certificate the dialler does not trust (or that names another
 * host) is `ERR_CONNECT` and not retryable (the same CA refuses it again), naming what to check;
 * anything else is the usual retryable `ERR_CONNECT`.
 */
export function tlsDialError(address: string, cause: unknown): LanemuxError {
  const code =
    typeof cause === 'object' && cause !== null && 'code' in cause ? String((cause as { code: unknown }).code) : '';
  const detail = describeThrown(cause);
  if (CERT_FAILURE.test(code) || CERT_FAILURE.test(detail)) {
    return new TransportError(
      'ERR_CONNECT',
      `tls connect to ${address}: the server's certificate was refused (${code !== '' ? `${code}: ` : ''}${detail}); check tls.ca and tls.servername`,
      { cause, retryable: false },
    );
  }
  return asTransportError('ERR_CONNECT', `tls connect to ${address}`, cause);
}

// Node/OpenSSL codes (…CERT…, ERR_TLS_CERT_ALTNAME_INVALID), rustls (Deno: "invalid peer certificate:
// UnknownIssuer"), BoringSSL (Bun: "self signed certificate", UNABLE_TO_VERIFY_LEAF_SIGNATURE).
const CERT_FAILURE = /CERT|certificate|UnknownIssuer|self[- ]signed|LEAF_SIGNATURE|ISSUER/i;

/** Options of the Deno and Bun WebSocket server adapters (listen only). */
export interface SocketWebSocketServerOptions {
  /** Listen on this host. Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Listen on this port, 0 for a free one. Defaults to 0. */
  readonly port?: number;
  /** URL path of the endpoint; other paths get 404. Defaults to `/lanemux`. */
  readonly path?: string;
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** After a graceful close, drop the socket if the close handshake has not finished. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
  /** While an admission waits and the runtime has no drain event, re-check the buffer this often. Defaults to 5 ms. */
  readonly drainPollMs?: number;
  /**
   * Authenticate each peer from its upgrade request (URL, headers, cookies) and HELLO credential;
   * see `Authenticate`. Defaults to the messenger's `authenticate`, else none.
   */
  readonly authenticate?: Authenticate;
}

export const wsServerOptionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  path: z._default(z.string().check(z.startsWith('/')), '/lanemux'),
  ...admissionSchema,
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  drainPollMs: z._default(int(1, 1_000), 5),
  ...authenticateOption,
});

export type WsServerOptions = z.output<typeof wsServerOptionsSchema>;

/** `tcp://host:port` (or `tls://…`), brackets around an IPv6 host. */
export function formatTcpAddress(host: string, port: number, scheme: 'tcp' | 'tls' = 'tcp'): string {
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** `ws://host:port/path`, brackets around an IPv6 host. */
export function formatWsAddress(host: string, port: number, path: string): string {
  return `ws://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;
}

/** `tcp://host:port` (or `tls://…`) → parts, or undefined if it is not one. */
export function parseTcpAddress(
  address: string,
  scheme: 'tcp' | 'tls' = 'tcp',
): { host: string; port: number } | undefined {
  try {
    const url = new URL(address);
    const port = Number(url.port);
    if (url.protocol !== `${scheme}:` || !Number.isInteger(port) || port <= 0) return undefined;
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
  } catch {
    return undefined;
  }
}

/** Why a TCP dial cannot start: the adapter is closed, or `address` is not `tcp://host:port` (`tls://…`). */
export function tcpDialRefusal(
  address: string,
  closed: boolean,
  adapter: string,
  scheme: 'tcp' | 'tls' = 'tcp',
): TransportError {
  return closed
    ? new TransportError('ERR_CLOSED', `${adapter} is closed`)
    : new TransportError('ERR_UNSUPPORTED_ADDRESS', `not a ${scheme}://host:port address: ${address}`);
}
