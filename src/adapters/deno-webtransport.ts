/**
 * WebTransport server adapter for Deno (`Deno.QuicEndpoint` + `Deno.upgradeWebTransport`, which need
 * `deno run --unstable-net`). Browsers and Deno clients dial it with `webTransportClientTransport`.
 * Node 20 and Bun cannot serve WebTransport (no HTTP/3 server): there, this entry point
 * (`lanemux/transport/webtransport-server`) resolves to `node-webtransport.ts`, which throws
 * `ERR_UNSUPPORTED_RUNTIME`; serve browsers over WebSocket (`lanemux/transport/ws-server`) instead.
 *
 * Each client-opened bidirectional stream is one lane connection handed to the transport core; the
 * HELLO on it says which link and lane it is (one session per link, see `webtransport.ts`). The lane
 * machinery (framing, END marker, closing handshake, admission) is in `webtransport-stream.ts`.
 *
 * Limits, all finite: `maxSessions` concurrent sessions, `maxStreamsPerSession` streams per session
 * (Deno 2.9.6 never returns stream credit, denoland/deno#36822, so a session must not churn streams),
 * and a session that opens no stream within `sessionIdleTimeoutMs` is closed.
 *
 * @example
 * ```ts
 * // deno run --unstable-net --allow-net server.ts
 * const cert = await createDevCertificate();  // or a CA-signed certificate (then clients need no hash)
 * const server = await createMessenger({
 *   transports: [webTransportServerTransport({ port: 4433, cert: cert.certPem, key: cert.keyPem })],
 * });
 * server.addresses[0]; // 'https://127.0.0.1:4433/lanemux'
 * ```
 *
 * @packageDocumentation
 */
import { acceptLoop } from '../transport/accept-loop.ts';
import * as z from '../schema.ts';
import { ConfigError, LanemuxError } from '../errors.ts';
import type { AdmissionLimits } from '../transport/admission.ts';
import { TransportError, describeThrown, listenFailure } from '../transport/errors.ts';
import { FRAME_PREFIX_BYTES, writeFrame } from '../transport/frame.ts';
import { encodeGoaway } from '../transport/hello.ts';
import { admissionSchema } from '../transport/options.ts';
import { parseOptions } from '../validate.ts';
import { int } from '../validate.ts';
import { failDial } from '../transport/fail-dial.ts';
import {
  MAX_LANES,
  type DialEvents,
  type DialHandle,
  type DialRequest,
  type ListenHost,
  type TransportAdapter,
} from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { WtSessionLanes, WtStreamConn, type WtBidiStream, type WtSessionLike } from './webtransport-stream.ts';
import { authenticateOption, type Authenticate, type UpgradeRequest } from '../transport/auth.ts';

/** Options of {@link webTransportServerTransport}. */
export interface WebTransportServerTransportOptions {
  /** Server certificate chain, PEM. Required (see `createDevCertificate` for development). */
  readonly cert: string;
  /** Private key of the certificate, PEM (PKCS#8). Required. */
  readonly key: string;
  /** UDP address to bind. Defaults to `127.0.0.1` (bind `::` for dual-stack; browsers resolve `localhost` to `::1` first). */
  readonly hostname?: string;
  /** UDP port; 0 picks a free one. Defaults to 0. */
  readonly port?: number;
  /** URL path of the endpoint; sessions for another path are closed. Defaults to `/lanemux`. */
  readonly path?: string;
  /** Admission is synchronous while fewer bytes than this wait in a stream writer. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per lane before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** After a graceful close, how long to wait for the client's END before closing the session. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
  /** Most concurrent sessions; more are refused at the QUIC handshake. Defaults to 1,024. */
  readonly maxSessions?: number;
  /** Most streams one session may open (a link uses one per lane). Defaults to 32. */
  readonly maxStreamsPerSession?: number;
  /** A session with no stream for this long after it opened is closed. Defaults to 10,000 ms. */
  readonly sessionIdleTimeoutMs?: number;
  /**
   * Deno 2.9.6 never frees the UDP port of a closed `QuicEndpoint`, so a server closed and created
   * again in the same process cannot listen on the same port. With this option a closed adapter keeps
   * its endpoint (refusing new sessions) for this long, and an adapter that listens on the same
   * hostname and port meanwhile takes it over. The process stays alive while an endpoint lingers.
   * Defaults to 0 (close the endpoint at once).
   */
  readonly reuseEndpointWithinMs?: number;
  /**
   * Authenticate each peer from its session URL (query included; Deno exposes no request headers)
   * and HELLO credential; see `Authenticate`. Defaults to the messenger's `authenticate`, else none.
   */
  readonly authenticate?: Authenticate;
}

const certificateSchema = z.object({
  cert: z.string().check(z.includes('-----BEGIN', { message: 'cert must be PEM' })),
  key: z.string().check(z.includes('-----BEGIN', { message: 'key must be PEM' })),
});

const optionsSchema = z.extend(certificateSchema, {
  hostname: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  path: z._default(z.string().check(z.startsWith('/')), '/lanemux'),
  ...admissionSchema,
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  maxSessions: z._default(int(1, 1_000_000), 1024),
  maxStreamsPerSession: z._default(int(1, 10_000), 2 * MAX_LANES),
  sessionIdleTimeoutMs: z._default(int(1, 600_000), 10_000),
  reuseEndpointWithinMs: z._default(int(0, 3_600_000), 0),
  ...authenticateOption,
});

/** The WebTransport server adapter: a {@link TransportAdapter} that can change its certificate. */
export interface WebTransportServerAdapter extends TransportAdapter {
  /**
   * Serve another certificate from now on (rotation: see `createCertificateRotation`), without
   * closing the endpoint or its sessions. New sessions get the new certificate.
   */
  setCertificate(certificate: { readonly cert: string; readonly key: string }): void;
}

type Resolved = z.output<typeof optionsSchema>;

// ---------------------------------------------------------------------------------------------
// The slice of Deno's unstable QUIC/WebTransport API used here (Deno 2.9, `--unstable-net`).
// ---------------------------------------------------------------------------------------------

interface DenoNetAddr {
  readonly hostname: string;
  readonly port: number;
}

interface DenoServerSession extends WtSessionLike {
  readonly url: string;
  readonly ready: Promise<unknown>;
  readonly incomingBidirectionalStreams: ReadableStream<WtBidiStream>;
}

interface DenoQuicConn {
  readonly remoteAddr: DenoNetAddr;
  close(info?: { closeCode: number; reason: string }): void;
}

interface DenoQuicIncoming {
  readonly remoteAddr: DenoNetAddr;
  accept(): Promise<DenoQuicConn>;
  refuse(): void;
}

interface DenoQuicListener {
  incoming(): Promise<DenoQuicIncoming>;
  stop(): void;
}

interface DenoQuicEndpoint {
  readonly addr: DenoNetAddr;
  listen(options: {
    cert: string;
    key: string;
    alpnProtocols: string[];
    maxConcurrentBidirectionalStreams: number;
    maxConcurrentUnidirectionalStreams: number;
  }): DenoQuicListener;
  close(info?: { closeCode: number; reason: string }): void;
}

interface DenoWebTransportApi {
  readonly QuicEndpoint: new (options: { hostname: string; port: number }) => DenoQuicEndpoint;
  upgradeWebTransport(conn: DenoQuicConn): Promise<DenoServerSession>;
}

function denoApi(): DenoWebTransportApi {
  const deno = (globalThis as { Deno?: Partial<DenoWebTransportApi> }).Deno;
  if (deno === undefined) {
    throw new LanemuxError(
      'ERR_UNSUPPORTED_RUNTIME',
      'webTransportServerTransport runs on Deno only (Node 20 and Bun have no WebTransport/HTTP3 server): serve browsers over WebSocket (lanemux/transport/ws-server) or run this server on Deno',
    );
  }
  if (typeof deno.QuicEndpoint !== 'function' || typeof deno.upgradeWebTransport !== 'function') {
    throw new LanemuxError(
      'ERR_UNSUPPORTED_RUNTIME',
      'webTransportServerTransport needs Deno.QuicEndpoint and Deno.upgradeWebTransport: run deno with --unstable-net (Deno ≥ 2.2)',
    );
  }
  return deno as DenoWebTransportApi;
}

/** Create a Deno WebTransport server adapter (listen only). */
export function webTransportServerTransport(options: WebTransportServerTransportOptions): WebTransportServerAdapter {
  const api = denoApi();
  return new DenoWtServerAdapter(parseOptions(optionsSchema, options, 'webTransportServerTransport'), api);
}

/**
 * A bound endpoint and its listener, which hands each incoming connection to the adapter that owns
 * the endpoint now (or refuses it). Lingering endpoints (see `reuseEndpointWithinMs`) are kept here
 * by hostname:port.
 */
interface BoundEndpoint {
  readonly endpoint: DenoQuicEndpoint;
  readonly poolKey: string;
  listener: DenoQuicListener;
  cert: string;
  key: string;
  owner: ((incoming: DenoQuicIncoming) => void) | undefined;
  linger: TimerHandle | undefined;
  /** The endpoint was closed (`unbind`): its accept loop ends. */
  closed: boolean;
  /** Clock and timers of the node that bound it: its accept loops' back-off and its linger timer. */
  readonly runtime: Runtime;
  /**
   * Listeners replaced by `relisten`, kept reachable until `unbind`: Deno's ListenerResource clears
   * the endpoint's server config when garbage-collected, which would stop the current listener too.
   */
  readonly replaced: DenoQuicListener[];
}

const lingering = new Map<string, BoundEndpoint>();

function listenOn(endpoint: DenoQuicEndpoint, o: Resolved, cert: string, key: string): DenoQuicListener {
  try {
    return endpoint.listen({
      cert,
      key,
      alpnProtocols: ['h3'],
      // Peer-opened streams this QUIC connection allows at once: our own per-session cap, enforced
      // with a clear GOAWAY, must be the one that bites.
      maxConcurrentBidirectionalStreams: o.maxStreamsPerSession + 8,
      // HTTP/3 needs the peer's control and QPACK streams; lanemux opens no others.
      maxConcurrentUnidirectionalStreams: 16,
    });
  } catch (e) {
    throw new ConfigError('cert', `cannot listen (bad cert/key?): ${describeThrown(e)}`, {
      fields: ['cert', 'key'],
      where: 'webTransportServerTransport',
      cause: e,
    });
  }
}

/** Hand every connection of `listener` to the endpoint's current owner. */
function dispatch(bound: BoundEndpoint, listener: DenoQuicListener): void {
  void acceptLoop({
    accept: () => listener.incoming(),
    // Ends when the listener is replaced (certificate rotation) or the endpoint closed.
    stopped: () => bound.listener !== listener || bound.closed,
    onAccepted: (incoming) => {
      // One connection that fails while it is handed over must not end the accept loop for everyone.
      try {
        if (bound.owner !== undefined) bound.owner(incoming);
        else incoming.refuse();
      } catch {
        // That connection is lost; the next one is accepted as usual.
      }
    },
    runtime: bound.runtime,
  });
}

function bind(api: DenoWebTransportApi, o: Resolved, runtime: Runtime): BoundEndpoint {
  let endpoint: DenoQuicEndpoint;
  try {
    endpoint = new api.QuicEndpoint({ hostname: o.hostname, port: o.port });
  } catch (e) {
    throw listenFailure('webTransportServerTransport', o.hostname, o.port, e);
  }
  let listener: DenoQuicListener;
  try {
    listener = listenOn(endpoint, o, o.cert, o.key);
  } catch (e) {
    endpoint.close();
    throw e;
  }
  const bound: BoundEndpoint = {
    endpoint,
    listener,
    cert: o.cert,
    key: o.key,
    poolKey: `${o.hostname}|${endpoint.addr.port}`,
    owner: undefined,
    linger: undefined,
    closed: false,
    runtime,
    replaced: [],
  };
  dispatch(bound, listener);
  return bound;
}

/**
 * Serve another certificate on the same endpoint: a new listener replaces the old one (a connection
 * the old listener was already waiting for still reaches the owner through its dispatch loop).
 */
function relisten(bound: BoundEndpoint, o: Resolved, cert: string, key: string): void {
  // Stop first: Deno 2.9.6 keeps one listener per endpoint, and stopping the old one after the new
  // one is created stops accepting altogether.
  bound.replaced.push(bound.listener);
  try {
    bound.listener.stop();
  } catch {
    // Already stopped.
  }
  let listener: DenoQuicListener;
  try {
    listener = listenOn(bound.endpoint, o, cert, key);
  } catch (e) {
    // Keep serving the old certificate rather than nothing.
    bound.listener = listenOn(bound.endpoint, o, bound.cert, bound.key);
    dispatch(bound, bound.listener);
    throw e;
  }
  bound.listener = listener;
  bound.cert = cert;
  bound.key = key;
  dispatch(bound, listener);
}

function unbind(bound: BoundEndpoint): void {
  if (lingering.get(bound.poolKey) === bound) lingering.delete(bound.poolKey);
  bound.closed = true;
  try {
    bound.listener.stop();
  } catch {
    // Already stopped.
  }
  try {
    bound.endpoint.close({ closeCode: 0, reason: 'closed' });
  } catch {
    // Already closed.
  }
  bound.replaced.length = 0;
}

class DenoWtServerAdapter implements WebTransportServerAdapter {
  readonly name = 'webtransport-server';
  readonly authenticate: Authenticate | undefined;
  readonly dialSchemes = [] as const;
  readonly #o: Resolved;
  readonly #api: DenoWebTransportApi;
  readonly #limits: AdmissionLimits;
  readonly #sessions = new Set<WtSessionLanes<DenoServerSession>>();
  /** QUIC connections accepted but not yet upgraded (counted against maxSessions). */
  #handshaking = 0;
  #bound: BoundEndpoint | undefined;
  #closed = false;

  constructor(o: Resolved, api: DenoWebTransportApi) {
    this.#o = o;
    this.authenticate = o.authenticate;
    this.#api = api;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    const o = this.#o;
    let bound = o.port === 0 ? undefined : lingering.get(`${o.hostname}|${o.port}`);
    if (bound === undefined) bound = bind(this.#api, o, host.runtime);
    else {
      if (bound.linger !== undefined) bound.runtime.clearTimer(bound.linger);
      bound.linger = undefined;
      lingering.delete(bound.poolKey);
      if (bound.cert !== o.cert || bound.key !== o.key) relisten(bound, o, o.cert, o.key);
    }
    bound.owner = (incoming) => {
      if (this.#closed || this.#sessions.size + this.#handshaking >= o.maxSessions) incoming.refuse();
      else void this.#session(incoming, host);
    };
    this.#bound = bound;
    const h = o.hostname.includes(':') ? `[${o.hostname}]` : o.hostname;
    return `https://${h}:${bound.endpoint.addr.port}${o.path}`;
  }

  async #session(incoming: DenoQuicIncoming, host: ListenHost): Promise<void> {
    const o = this.#o;
    this.#handshaking++;
    let session: DenoServerSession;
    let remote: string;
    let conn: DenoQuicConn | undefined;
    let late: TimerHandle | undefined;
    const rt = host.runtime;
    try {
      // A peer that completes QUIC but never sends its CONNECT must not hold a maxSessions slot forever.
      const deadline = new Promise<never>((_, reject) => {
        late = rt.setTimer(() => reject(new Error('webtransport handshake timed out')), o.sessionIdleTimeoutMs);
      });
      deadline.catch(() => {});
      conn = await Promise.race([incoming.accept(), deadline]);
      const a = conn.remoteAddr;
      remote = `https://${a.hostname.includes(':') ? `[${a.hostname}]` : a.hostname}:${a.port}`;
      session = await Promise.race([this.#api.upgradeWebTransport(conn), deadline]);
      session.closed.catch(() => {});
      await Promise.race([session.ready, deadline]);
    } catch {
      // Handshake failed or timed out: nothing was handed over; free the QUIC connection now.
      try {
        conn?.close({ closeCode: 0, reason: 'webtransport handshake failed' });
      } catch {
        // Already closed.
      }
      return;
    } finally {
      if (late !== undefined) rt.clearTimer(late);
      this.#handshaking--;
    }
    let path: string | undefined;
    try {
      path = new URL(session.url).pathname;
    } catch {
      path = undefined;
    }
    if (this.#closed || path !== o.path) {
      try {
        session.close({ closeCode: 404, reason: this.#closed ? 'closing' : `no lanemux endpoint at ${path ?? '?'}` });
      } catch {
        // Already gone.
      }
      return;
    }
    const lanes: WtSessionLanes<DenoServerSession> = new WtSessionLanes(session, remote, o.closeGraceMs, rt, () => {
      this.#sessions.delete(lanes);
    });
    this.#sessions.add(lanes);
    const idle = rt.setTimer(() => {
      if (lanes.size === 0) lanes.close({ closeCode: 0, reason: 'no stream opened' });
    }, o.sessionIdleTimeoutMs);
    void lanes.closedPromise.then(() => rt.clearTimer(idle));
    const upgrade: UpgradeRequest = { url: session.url, headers: {} };
    const reader = session.incomingBidirectionalStreams.getReader();
    try {
      for (;;) {
        const { value: stream, done } = await reader.read();
        if (done || !lanes.usable) break;
        if (lanes.size >= o.maxStreamsPerSession) {
          refuseStream(
            stream,
            new TransportError(
              'ERR_TOO_MANY_PEERS',
              `more than ${o.maxStreamsPerSession} streams on one WebTransport session; open a new session per link`,
            ),
          );
          continue;
        }
        const conn = new WtStreamConn(stream, remote, host.frameLimit, this.#limits, lanes, host.framePolicy);
        conn.request = upgrade;
        host.accept(conn);
      }
    } catch {
      // The session closed.
    }
  }

  setCertificate(certificate: { readonly cert: string; readonly key: string }): void {
    const c = parseOptions(certificateSchema, certificate, 'setCertificate');
    const bound = this.#bound;
    if (bound === undefined || this.#closed)
      throw new TransportError('ERR_CLOSED', 'setCertificate: the WebTransport server is not listening');
    if (bound.cert !== c.cert || bound.key !== c.key) relisten(bound, this.#o, c.cert, c.key);
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    return failDial(
      events,
      new TransportError(
        'ERR_UNSUPPORTED_ADDRESS',
        `the WebTransport server adapter does not dial (${request.address}); use webTransportClientTransport`,
      ),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const bound = this.#bound;
    if (bound !== undefined) bound.owner = undefined;
    // Links were closed gracefully before adapters: each session closes once its lanes' closing
    // handshake completes, or after closeGraceMs.
    const sessions = [...this.#sessions];
    for (const s of sessions) s.update();
    await Promise.all(sessions.map((s) => waitOrClose(s, this.#o.closeGraceMs + 100)));
    if (bound === undefined || bound.owner !== undefined) return;
    const ms = this.#o.reuseEndpointWithinMs;
    if (ms === 0) {
      unbind(bound);
      return;
    }
    lingering.set(bound.poolKey, bound);
    bound.linger = bound.runtime.setTimer(() => unbind(bound), ms);
  }
}

/** A stream we will not carry: say why (GOAWAY, then END) and never read it. */
function refuseStream(stream: WtBidiStream, error: LanemuxError): void {
  const goaway = encodeGoaway(error);
  const bytes = new Uint8Array(2 * FRAME_PREFIX_BYTES + goaway.byteLength);
  writeFrame(bytes.subarray(0, FRAME_PREFIX_BYTES + goaway.byteLength), goaway, undefined);
  const writer = stream.writable.getWriter();
  writer.write(bytes).catch(() => {});
  writer.closed.catch(() => {});
}

function waitOrClose(s: WtSessionLanes, ms: number): Promise<void> {
  const rt = s.runtime;
  return new Promise<void>((resolve) => {
    const timer = rt.setTimer(() => {
      s.close();
      resolve();
    }, ms);
    void s.closedPromise.then(() => {
      rt.clearTimer(timer);
      resolve();
    });
  });
}
