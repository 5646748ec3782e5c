/**
 * `connect(url)`: a page's lanemux client — one server, one connection, every stream on it. It
 * calls the server's served methods (`client.stream`), makes anchors and zero-RTT tickets for
 * producers that attach, reads and cancels, and resumes its streams when the connection blinks
 * (docs/protocol.md §8.3): the page sees a pause, nothing lost or repeated.
 *
 * It is a consumer for one dialled peer, written for a page's bundle: no peer table, no listener, no
 * producer side, one lane. Everything it says on the wire is docs/protocol.md's; a page that also
 * produces, listens or links to several peers uses `createNode` from `lanemux`.
 */
import { ConfigError, LanemuxError, isLanemuxError } from '../errors.ts';
import { type Runtime, type TimerHandle, randomHex, randomU64, systemRuntime } from '../runtime/runtime.ts';
import { CALL_PREFIX, CALL_VERSION, CallError, MAX_METHOD_BYTES } from '../stream/call-envelope.ts';
import { ResumeFailedError, StreamError } from '../stream/errors.ts';
import { u64Hex } from '../stream/handle.ts';
import type { CredentialSource } from '../transport/auth.ts';
import { toBase64Url } from '../wire/base64url.ts';
import { isMap } from '../wire/checks.ts';
import { MESSENGER_MUX_KEY } from '../wire/constants.ts';
import { encodeItemValue } from '../wire/item.ts';
import { decodeBounded, encodeShared } from '../wire/msgpack.ts';
import { attachOk, isCount, readAttach, refuse } from './attach-request.ts';
import { Bind } from './bind.ts';
import { type CarrierFactory, type WebSocketConstructor, webSocketCarrier } from './carrier.ts';
import { Ingress } from './ingress.ts';
import { Link, RESUME_KEY, type ServerHello } from './link.ts';
import { ClientStream } from './stream.ts';

/** Options of {@link connect}. Every limit is finite; the defaults are the server's. */
export interface ClientOptions {
  /**
   * How to reach the server: a carrier factory such as `webTransportCarrier()` or
   * `browserCarrier()`. Defaults to the WebSocket carrier (`ws://`, `wss://` URLs).
   */
  readonly transport?: CarrierFactory;
  /** The WebSocket constructor of the default carrier. Defaults to the global one (on Node 20, pass `ws`'s). */
  readonly WebSocket?: WebSocketConstructor;
  /** What the server's `authenticate` checks: a string, or a function called before every (re)connect. */
  readonly credential?: CredentialSource;
  /** Records a stream's producer may send before the page reads (C, 1..65,536). Defaults to 32. */
  readonly initialCredit?: number;
  /** Bytes one stream may hold unread (1 KiB..1 GiB). Defaults to 1 MiB. */
  readonly slotByteBudget?: number;
  /** Bytes all streams together may hold unread: the receive window (64 KiB..4 GiB − 1). Defaults to 8 MiB. */
  readonly receiveWindow?: number;
  /** Largest message accepted (4 KiB..256 MiB). Defaults to 1 MiB. */
  readonly maxMessageSize?: number;
  /** A producer's heartbeat interval, and the watchdog's window (ms, 10..600,000). Defaults to 5,000. */
  readonly heartbeatIntervalMs?: number;
  /** How long a first connect may take, and a HELLO (ms). Defaults to 10,000. */
  readonly connectTimeoutMs?: number;
  /** How long a call's request waits for its acceptance (ms). Defaults to 10,000. */
  readonly requestTimeoutMs?: number;
  /** How long a stream waits for its resume after the connection is lost (ms). Defaults to 30,000. */
  readonly resumeWindowMs?: number;
  /** The first re-dial's delay after a lost connection (ms, doubling to 10 s, jittered). Defaults to 250. */
  readonly reconnectDelayMs?: number;
  /** How long an anchor's ticket (or a remembered cancel) waits for its producer (ms). Defaults to 60,000. */
  readonly acceptWindowMs?: number;
  /** Clock, timers and randomness. Defaults to the current runtime's. */
  readonly runtime?: Runtime;
}

/** Options of {@link Client.stream}. */
export interface StreamCallOptions {
  /** Aborting it cancels the call. */
  readonly signal?: AbortSignal;
}

const LIMITS: Record<string, readonly [min: number, max: number, def: number]> = {
  initialCredit: [1, 65_536, 32],
  slotByteBudget: [1024, 2 ** 30, 1_048_576],
  receiveWindow: [65_536, 0xffff_ffff, 8_388_608],
  maxMessageSize: [4096, 256 * 1024 * 1024, 1_048_576],
  heartbeatIntervalMs: [10, 600_000, 5000],
  connectTimeoutMs: [1, 600_000, 10_000],
  requestTimeoutMs: [1, 600_000, 10_000],
  resumeWindowMs: [0, 3_600_000, 30_000],
  acceptWindowMs: [1, 86_400_000, 60_000],
  reconnectDelayMs: [1, 60_000, 250],
};

/** The numeric options, resolved. */
type Limits = { readonly [K in keyof typeof LIMITS]: number } & {
  readonly initialCredit: number;
  readonly slotByteBudget: number;
  readonly receiveWindow: number;
  readonly maxMessageSize: number;
  readonly heartbeatIntervalMs: number;
  readonly connectTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly resumeWindowMs: number;
  readonly acceptWindowMs: number;
  readonly reconnectDelayMs: number;
};

/** Watchdog tick (ms): the granularity of heartbeat windows and deadlines. */
const TICK_MS = 250;

/**
 * Connect to a lanemux server at `url` (`ws://…/lanemux`, `wss://…`, or what the chosen carrier
 * dials). Resolves once the link formed; rejects at once when the server cannot be reached or refuses
 * the page (`ERR_CONNECT`, `ERR_UNAUTHENTICATED`, …), and within `connectTimeoutMs` otherwise. A bad
 * option throws `ERR_INVALID_CONFIG` naming it.
 *
 * @example
 * ```ts
 * const client = await connect('wss://example.com/lanemux');
 * for await (const token of client.stream<string>('generate', { prompt: 'Hello' })) out.textContent += token;
 * ```
 */
export async function connect(url: string, options: ClientOptions = {}): Promise<Client> {
  let client: Client;
  try {
    client = new Client(url, options);
  } catch (e) {
    // zod, loaded only now, words the refusal; if it cannot load, or accepts, the check's own error stands.
    if (!(e instanceof ConfigError)) throw e;
    const why = await import('./explain-options.ts')
      .then((m) => m.explainOptions(LIMITS, options as Record<string, unknown>))
      .catch(() => undefined);
    if (why === undefined) throw e;
    throw new ConfigError(why.field, why.message, { where: 'connect', fields: why.fields, cause: e });
  }
  await client._start();
  return client;
}

/** A page's link to its lanemux server (see {@link connect}). */
export class Client {
  /** This page's worker id (16 hex digits): the first half of its anchors' handles. */
  readonly workerId: string;
  readonly #o: Limits;
  readonly #rt: Runtime;
  readonly #link: Link;
  readonly #ingress: Ingress;
  /** Open anchors by local id. */
  readonly #anchors = new Map<bigint, ClientStream>();
  /** Older sessions of a stream resumed on a bind not claimed yet (a second loss may name them). */
  readonly #aliases = new Map<bigint, Bind>();
  /** Streams waiting for their resume, with the time their link was lost. */
  readonly #suspended = new Map<Bind, number>();
  #server: ServerHello | null = null;
  #timer: TimerHandle | undefined;
  #closed: LanemuxError | null = null;
  #resumed = 0;
  #failedResumes = 0;
  #listeners = new Set<(state: 'up' | 'down' | 'closed', error?: LanemuxError) => void>();

  /** @internal Use {@link connect}. */
  constructor(url: string, options: ClientOptions) {
    const o = {} as Record<string, number>;
    for (const [k, [min, max, def]] of Object.entries(LIMITS)) {
      const v = (options as Record<string, unknown>)[k] ?? def;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
        throw new ConfigError(k, `must be an integer in ${min}..${max}, got ${String(v)}`, { where: 'connect' });
      o[k] = v;
    }
    this.#o = o as unknown as Limits;
    const rt = options.runtime ?? systemRuntime();
    this.#rt = rt;
    this.workerId = randomHex(rt, 8);
    this.#link = new Link(
      {
        url,
        carrier: options.transport ?? webSocketCarrier(options.WebSocket),
        runtime: rt,
        worker: this.workerId,
        credential: options.credential,
        maxMessageSize: this.#o.maxMessageSize,
        window: this.#o.receiveWindow,
        connectTimeoutMs: this.#o.connectTimeoutMs,
        requestTimeoutMs: this.#o.requestTimeoutMs,
        healthIntervalMs: 5000,
        reconnect: { initialDelayMs: this.#o.reconnectDelayMs, maxDelayMs: 10_000, factor: 1.6 },
      },
      {
        up: (server, epoch) => this.#up(server, epoch),
        down: (error, final) => this.#down(error, final),
        batch: (payload) => this.#ingress.apply(payload),
        message: (name, payload) => this.#message(name, payload),
        request: (name, body) => this.#request(name, body),
      },
    );
    this.#ingress = new Ingress(this.#link, this.#o.receiveWindow);
    this.#ingress.onFinished = (s) => this.#forget(s);
  }

  /** @internal */
  async _start(): Promise<void> {
    await this.#link.start();
    this.#timer = this.#rt.setTimer(this.#tick, TICK_MS);
  }

  /** The server's worker id (16 hex digits). */
  get server(): string {
    return this.#server?.worker ?? '';
  }

  /** True while the connection is up (streams pause, not end, while it is down). */
  get connected(): boolean {
    return this.#link.up;
  }

  /**
   * Be told when the connection goes down (streams pause), comes back, or closes for good. Returns
   * a function that stops it.
   */
  onState(listener: (state: 'up' | 'down' | 'closed', error?: LanemuxError) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Call the server's served method `method` with `request` and read its answer as a stream
   * (docs/protocol.md §8.6): one round trip, the ticket inside the request. Never throws: a refusal
   * (`ERR_UNKNOWN_METHOD`, `ERR_CALL_LIMIT`, …) or the handler's failure ends the stream with a
   * `CallError`; `signal` or `cancel()` cancels the handler.
   */
  stream<T = unknown>(method: string, request?: unknown, options: StreamCallOptions = {}): ClientStream<T> {
    const s = this.#newStream<T>(method);
    if (this.#closed !== null) {
      s.end(new StreamError('ERR_CLOSED', 'the client is closed'));
      return s;
    }
    let r: Uint8Array;
    try {
      if (new TextEncoder().encode(method).byteLength > MAX_METHOD_BYTES || method === '')
        throw new CallError('ERR_INVALID_REQUEST', method, `a method name is 1..${MAX_METHOD_BYTES} bytes`);
      // A copy: the encoder's buffer is shared, and the request goes out once the link is up.
      r = encodeItemValue(request).slice();
    } catch (e) {
      s.end(
        isLanemuxError(e)
          ? e
          : new CallError('ERR_INVALID_REQUEST', method, `the request cannot be sent: ${String(e)}`),
      );
      this.#forget(s as ClientStream);
      return s;
    }
    const signal = options.signal;
    if (signal !== undefined) {
      const abort = (): void => s.cancel(new StreamError('ERR_ABORTED', `the call to "${method}" was aborted`));
      if (signal.aborted) abort();
      else signal.addEventListener('abort', abort, { once: true });
    }
    void this.#call(s as ClientStream, method, r);
    return s;
  }

  /** Send a call's request once the link is up (within `requestTimeoutMs`), its ticket inside. */
  async #call(s: ClientStream, method: string, r: Uint8Array): Promise<void> {
    try {
      await this.#whenUp();
      if (s.ended) return;
      const ticket = this.#ticket(s);
      await this.#link.request(`${CALL_PREFIX}${method}`, { v: CALL_VERSION, h: s.handle, t: ticket, r });
    } catch (e) {
      // A lost acceptance does not end a stream that opened, nor one whose request may have arrived: it resumes (§8.6).
      if (s.ended || (s.bind !== null && s.bind.state !== 'waiting')) return;
      const code = isLanemuxError(e) ? e.code : 'ERR_INVALID_REQUEST';
      s.cancel(
        new CallError(
          code === 'ERR_UNKNOWN_HANDLER' ? 'ERR_UNKNOWN_METHOD' : code,
          method,
          code === 'ERR_UNKNOWN_HANDLER' ? `the server serves no method "${method}"` : String((e as Error).message),
          { retryable: isLanemuxError(e) && e.retryable, cause: e },
        ),
      );
    }
  }

  /** Resolves once the link is up; rejects `ERR_PEER_GONE` after `requestTimeoutMs`, `ERR_CLOSED` once closed. */
  #whenUp(): Promise<void> {
    if (this.#link.up) return Promise.resolve();
    if (this.#closed !== null) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      const timer = this.#rt.setTimer(() => {
        off();
        reject(
          new LanemuxError('ERR_PEER_GONE', `no connection to the server for ${this.#o.requestTimeoutMs} ms`, {
            retryable: true,
          }),
        );
      }, this.#o.requestTimeoutMs);
      const off = this.onState((state, error) => {
        if (state === 'down') return;
        off();
        this.#rt.clearTimer(timer);
        if (state === 'up') resolve();
        else reject(error ?? this.#closed);
      });
    });
  }

  /**
   * A new anchor: give its `handle` to a producer that attaches, or its {@link ticket} to one that
   * opens at once (zero-RTT). Read it as any stream. A `Detached` producer leaves it open for the
   * next; `cancel()` ends it.
   */
  anchor<T = unknown>(): ClientStream<T> {
    if (this.#closed !== null) throw new StreamError('ERR_CLOSED', 'the client is closed');
    return this.#newStream<T>(undefined);
  }

  /**
   * A zero-RTT ticket for `anchor` (docs/protocol.md §8): the producer that opens with it sends the
   * first records at once, no attach round trip. One ticket binds the anchor until its producer
   * finishes or detaches; it waits `acceptWindowMs` for the producer.
   */
  ticket(anchor: ClientStream): string {
    if (anchor.bind !== null && anchor.bind.state !== 'done')
      throw new StreamError('ERR_ALREADY_ATTACHED', 'the anchor already has a producer or a ticket');
    if (anchor.ended) throw new StreamError('ERR_STREAM_CLOSED', 'the anchor has ended');
    return this.#ticket(anchor);
  }

  /**
   * Take a stream again from item `offset + 1` after a page reload (docs/protocol.md §8.5): `token`
   * is the stream's resume token the producer handed out (kept, say, in `sessionStorage`). Resolves
   * with the anchor the items arrive on; rejects `ERR_ATTACH_REFUSED` when the server refuses
   * (unknown or evicted token, no history), or with the request's error.
   */
  async reattach<T = unknown>(
    token: string,
    options: { offset?: number; signal?: AbortSignal } = {},
  ): Promise<ClientStream<T>> {
    const offset = options.offset ?? 0;
    if (typeof token !== 'string' || token.length === 0 || token.length > 64 || !isCount(offset))
      throw new StreamError('ERR_ATTACH_REFUSED', 'a re-attach takes a token of 1..64 characters and an offset ≥ 0');
    options.signal?.throwIfAborted();
    const anchor = this.anchor<T>();
    const ticket = this.#ticket(anchor as ClientStream);
    let answer: unknown;
    try {
      answer = await this.#link.request('_stream_reattach', { token, offset, handle: anchor.handle, ticket });
    } catch (e) {
      anchor.cancel();
      throw isLanemuxError(e, 'ERR_UNKNOWN_HANDLER')
        ? new StreamError('ERR_ATTACH_REFUSED', 'the server does not re-attach streams', { cause: e })
        : e;
    }
    const ok = isMap(answer) && isMap(answer['Ok']) && isCount(answer['Ok']['sent']);
    if (!ok) {
      anchor.cancel();
      const err = isMap(answer) && isMap(answer['Err']) ? answer['Err']['reason'] : undefined;
      throw new StreamError(
        'ERR_ATTACH_REFUSED',
        typeof err === 'string' ? `re-attach refused: ${err.slice(0, 1024)}` : 'malformed re-attach answer',
      );
    }
    return anchor;
  }

  /** Counters: live slots, streams resumed, and the drops and faults the ingress saw. */
  metrics(): Record<string, number> {
    const c = this.#ingress.counters;
    return {
      velo_streaming_mux_live_slots: this.#ingress.liveSlots,
      client_open_streams: this.#anchors.size,
      streaming_mux_stragglers_total: c.stragglers,
      streaming_mux_no_route_total: c.dropped,
      streaming_mux_protocol_errors_total: c.violations,
      velo_streaming_heartbeat_watchdog_firings_total: c.watchdog,
      resumed_streams_total: this.#resumed,
      resume_failed_total: this.#failedResumes,
      peer_window_held_bytes: this.#ingress.held,
    };
  }

  /** Close: every stream ends `ERR_CLOSED` after what it holds, the server is told (GOAWAY). */
  close(): Promise<void> {
    if (this.#closed === null) {
      this.#closed = new StreamError('ERR_CLOSED', 'the client closed');
      this.#link.close();
    }
    return Promise.resolve();
  }

  #newStream<T>(method: string | undefined): ClientStream<T> {
    let id: bigint;
    do id = randomU64(this.#rt) & ~(1n << 63n);
    while (this.#anchors.has(id) || id === 0n);
    const handle = `lmx1.${this.workerId}${id.toString(16).padStart(16, '0')}`;
    const s = new ClientStream<T>(this.#ingress, handle, id, method);
    this.#anchors.set(id, s as ClientStream);
    return s;
  }

  /** A pre-bind for `s` and its ticket text. */
  #ticket(s: ClientStream): string {
    const o = this.#o;
    const session = this.#session();
    const b = new Bind(s, {
      session,
      credit: o.initialCredit,
      heartbeatMs: o.heartbeatIntervalMs,
      budget: o.slotByteBudget,
      answered: false,
      now: this.#rt.now(),
    });
    s.bind = b;
    this.#ingress.binds.set(session, b);
    if (!this.#link.up) this.#suspend(b);
    return toBase64Url(
      encodeShared({
        streaming_transport_key: MESSENGER_MUX_KEY,
        heartbeat_interval_ms: o.heartbeatIntervalMs,
        routing_session_id: u64Hex(session),
        initial_credit: o.initialCredit,
        slot_byte_budget: o.slotByteBudget,
        anchor_id: u64Hex(s.anchorId),
      }),
    );
  }

  #session(): bigint {
    let s: bigint;
    do s = randomU64(this.#rt);
    while (s === 0n || this.#ingress.binds.has(s));
    return s;
  }

  /** `s` ended or was cancelled: nothing of the client refers to it any more. */
  #forget(s: ClientStream): void {
    if (this.#anchors.get(s.anchorId) === s) this.#anchors.delete(s.anchorId);
    for (const [b] of this.#suspended) if (b.stream === s) this.#suspended.delete(b);
    for (const [session, b] of this.#aliases) if (b.stream === s) this.#aliases.delete(session);
  }

  #up(server: ServerHello, epoch: number): void {
    const previous = this.#server;
    this.#server = server;
    this.#ingress.linkUp(epoch, this.#link.sendLimit);
    if (previous !== null && (previous.worker !== server.worker || previous.instance !== server.instance)) {
      // Another process answers: the replay rings went with the old one (§8.3, `restarted`).
      for (const b of [...this.#suspended.keys()])
        this.#resumeFailed(b, 'restarted', `the server came back as another instance (${server.instance})`);
    }
    for (const fn of this.#listeners) fn('up');
  }

  #down(error: LanemuxError, final: boolean): void {
    const lost = this.#ingress.linkDown();
    const resumable = !final && this.#server?.keys.includes(RESUME_KEY) === true && this.#o.resumeWindowMs > 0;
    for (const b of lost) {
      if (resumable) this.#suspend(b);
      else {
        this.#ingress.binds.delete(b.session);
        b.state = 'done';
        b.stream.end(
          final && this.#closed !== null
            ? this.#closed
            : new StreamError('ERR_SENDER_DROPPED', `the connection to the server was lost: ${error.message}`, {
                retryable: true,
                cause: error,
              }),
        );
      }
    }
    if (final) {
      this.#closed ??= new StreamError('ERR_CLOSED', `the client closed: ${error.message}`, { cause: error });
      for (const b of [...this.#suspended.keys()]) this.#resumeFailed(b, 'closed', this.#closed.message);
      for (const s of this.#anchors.values()) if (s.bind === null && !s.ended) s.end(this.#closed);
      this.#anchors.clear();
      if (this.#timer !== undefined) this.#rt.clearTimer(this.#timer);
      this.#timer = undefined;
    }
    for (const fn of this.#listeners) fn(final ? 'closed' : 'down', error);
  }

  #suspend(b: Bind): void {
    b.state = 'lost';
    this.#suspended.set(b, this.#rt.now());
  }

  #resumeFailed(b: Bind, reason: 'window' | 'evicted' | 'restarted' | 'closed', message: string): void {
    this.#suspended.delete(b);
    this.#ingress.binds.delete(b.session);
    b.state = 'done';
    this.#failedResumes++;
    b.stream.end(new ResumeFailedError('ERR_SENDER_DROPPED', reason, message));
  }

  readonly #tick = (): void => {
    const now = this.#rt.now();
    this.#timer = this.#rt.setTimer(this.#tick, TICK_MS);
    for (const [b, since] of this.#suspended) {
      if (now - since >= this.#o.resumeWindowMs)
        this.#resumeFailed(
          b,
          'window',
          `the connection to the server was lost and the stream was not resumed within ${this.#o.resumeWindowMs} ms`,
        );
    }
    if (this.#link.up) this.#ingress.sweep(now, TICK_MS, this.#o.acceptWindowMs);
    // An older session of a resumed stream matters only until its new bind is claimed.
    for (const [session, b] of this.#aliases)
      if (b.state === 'live' || b.state === 'done') this.#aliases.delete(session);
  };

  #message(name: string, payload: Uint8Array): boolean {
    if (name === '_rv_stage') {
      this.#refuseStaged(payload);
      return true;
    }
    return false;
  }

  /** A record over the batch cap announced by rendezvous (§8.1): refused, the stream ends, the copy is released. */
  #refuseStaged(payload: Uint8Array): void {
    let d: { id?: unknown; size?: unknown; mux_slot?: unknown };
    try {
      d = (decodeBounded(payload) ?? {}) as typeof d;
    } catch {
      return;
    }
    const parts = typeof d.mux_slot === 'string' ? d.mux_slot.split(':') : [];
    if (parts.length !== 3 || !parts.every((p) => /^[0-9]{1,20}$/.test(p))) return;
    this.#ingress.refuseStaged(Number(parts[1]), BigInt(parts[2]!), Number(d.size));
    if (typeof d.id === 'number') this.#link.request('_rv_pull', { id: d.id, release: true }).catch(() => {});
  }

  #request(name: string, body: unknown): { answer: unknown } | undefined {
    if (name === '_anchor_attach') return { answer: this.#attach(body) };
    if (name === '_anchor_detach') return { answer: this.#detach(body) };
    return undefined;
  }

  /** `_anchor_attach` (docs/protocol.md §8, §8.3): a producer attaches to, or resumes, one of this page's anchors. */
  #attach(body: unknown): unknown {
    const req = readAttach(body, this.workerId);
    if (typeof req === 'string') return refuse(req);
    const s = this.#anchors.get(req.anchorId);
    if (req.resume !== undefined) return this.#resume(s, req.resume);
    if (s === undefined || s.ended) return refuse('unknown or finished anchor');
    if (!req.keys.includes(MESSENGER_MUX_KEY))
      return refuse(`no common streaming transport (this page takes ${MESSENGER_MUX_KEY})`);
    const old = s.bind;
    if (old !== null && old.state !== 'done') {
      // An attach made again after its answer was lost replaces that answer's unclaimed bind (§8.3).
      const again = req.attachId !== undefined && old.answered && old.attachId === req.attachId && old.state !== 'live';
      // A ticket holder may adopt its own unclaimed pre-bind by naming its session.
      const adopt = !old.answered && old.state === 'waiting' && req.session === old.session;
      if (adopt) return attachOk(old, undefined);
      if (!again) return refuse('the anchor already has a sender (AlreadyAttached)');
      this.#suspended.delete(old);
      this.#ingress.binds.delete(old.session);
      old.state = 'done';
    }
    return attachOk(this.#bind(s, this.#o.initialCredit, req.attachId), undefined);
  }

  #resume(s: ClientStream | undefined, r: { session: bigint; sent: number; from: number }): unknown {
    const named = this.#ingress.binds.get(r.session) ?? this.#aliases.get(r.session);
    const b = named === undefined ? undefined : named.stream.bind === named ? named : named.stream.bind;
    if (s === undefined || b === null || b === undefined || b.stream !== s || !this.#suspended.has(b) || s.ended)
      return { Err: { reason: 'resume: this page does not know the stream', resume: 'unknown' } };
    const received = s.received;
    if (r.sent < received)
      return refuse(`resume: ${received} items were received but the sender says it sent ${r.sent}`);
    this.#suspended.delete(b);
    this.#ingress.binds.delete(b.session);
    if (r.from > received + 1) {
      const reason = `replay evicted: the page has ${received} items and the producer can send again only from item ${r.from}`;
      this.#resumeFailed(b, 'evicted', reason);
      return { Err: { reason, resume: 'evicted' } };
    }
    b.state = 'done';
    const next = this.#bind(s, Math.max(1, this.#o.initialCredit - s.buffered), b.attachId);
    this.#aliases.set(b.session, next);
    if (r.session !== b.session) this.#aliases.set(r.session, next);
    this.#resumed++;
    return attachOk(next, received);
  }

  #bind(s: ClientStream, credit: number, attachId: string | undefined): Bind {
    const o = this.#o;
    const b = new Bind(s, {
      session: this.#session(),
      credit,
      heartbeatMs: o.heartbeatIntervalMs,
      budget: o.slotByteBudget,
      answered: true,
      attachId,
      now: this.#rt.now(),
    });
    s.bind = b;
    this.#ingress.binds.set(b.session, b);
    return b;
  }

  /** `_anchor_detach {handle, session_id}`: the producer handed over its Detached; the anchor takes a new attach once it is read. */
  #detach(body: unknown): unknown {
    const req = readAttach(body, this.workerId);
    const s = typeof req === 'string' ? undefined : this.#anchors.get(req.anchorId);
    if (s === undefined || s.ended) return refuse('unknown or finished anchor');
    return { Ok: null };
  }
}
