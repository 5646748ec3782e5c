/**
 * The page's link to its one server (docs/protocol.md §3, §4): one lane over one carrier, the HELLO
 * exchange, the messenger envelope (batches, messages, unary requests both ways, PING/PONG), the
 * health check, and re-dialling with jittered exponential back-off when the carrier is lost. Each
 * link that forms gets a new epoch; the client resumes its streams across them (§8.3).
 *
 * Bounded by construction: one carrier, at most `maxMessageSize` per message (the server's
 * WebSocket layer refuses larger ones; the client refuses what the HELLO did not allow), requests
 * in flight bounded by their timeout, one PING in flight.
 */
import { LanemuxError } from '../errors.ts';
import {
  Kind,
  decodeErrorBody,
  decodeName,
  encodeErrorBody,
  encodeName,
  idHead,
  messageHead,
  requestHead,
} from '../messenger/envelope.ts';
import { RemoteError } from '../messenger/errors.ts';
import { type Runtime, type TimerHandle, randomFraction, randomHex } from '../runtime/runtime.ts';
import type { CredentialSource } from '../transport/auth.ts';
import { TransportError } from '../transport/errors.ts';
import { KIND_GOAWAY, decodeHello, encodeGoaway, encodeHello, parseGoaway } from '../transport/hello.ts';
import { TERMINAL_CLOSE_CODES, closeFrameFor, errorForClose } from '../transport/ws-codes.ts';
import { MESSENGER_MUX_KEY } from '../wire/constants.ts';
import { decodeBounded, encodeShared, readU32 } from '../wire/msgpack.ts';
import type { Carrier, CarrierFactory } from './carrier.ts';

/** Protocol version spoken (docs/protocol.md §3.1). */
const PROTOCOL_VERSION = 1;
/** The transport key of resume (docs/protocol.md §8.3). */
export const RESUME_KEY = 'lanemux-resume-v1';
/** Largest message before the HELLO is processed (docs/protocol.md §2.1). */
const HELLO_FRAME_LIMIT = 16_384;
/** Unknown handler names a link tells the server about, at most (§4.5). */
const MAX_NOTICES = 64;

/** The server as its HELLO describes it. */
export interface ServerHello {
  readonly worker: string;
  readonly instance: string;
  readonly maxMessageSize: number;
  readonly keys: readonly string[];
}

/** What the link reports to the client. */
export interface LinkHost {
  /** A link formed (epoch from 1). */
  up(server: ServerHello, epoch: number): void;
  /** The link was lost; `final`: the client will not dial again (closed, refused, gave up). */
  down(error: LanemuxError, final: boolean): void;
  /** A BATCH payload (lane 0). */
  batch(payload: Uint8Array): void;
  /** A MESSAGE for `name`; false when nobody handles the name. */
  message(name: string, payload: Uint8Array): boolean;
  /** A REQUEST for `name`: its answer, or a thrown LanemuxError; `undefined` handler: unknown. */
  request(name: string, body: unknown): { answer: unknown } | undefined;
}

/** How the link dials and re-dials. */
export interface LinkOptions {
  readonly url: string;
  readonly carrier: CarrierFactory;
  readonly runtime: Runtime;
  /** This page's worker id, 16 lower-case hex digits. */
  readonly worker: string;
  readonly credential: CredentialSource | undefined;
  readonly maxMessageSize: number;
  /** The receive window advertised (docs/protocol.md §3.8). */
  readonly window: number;
  readonly connectTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly healthIntervalMs: number;
  readonly reconnect: { readonly initialDelayMs: number; readonly maxDelayMs: number; readonly factor: number };
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: LanemuxError): void;
  timer: TimerHandle;
}

/** One page's link to one server, re-dialled while the client is open. */
export class Link {
  readonly #o: LinkOptions;
  readonly #host: LinkHost;
  readonly #rt: Runtime;
  readonly #instance: string;
  #carrier: Carrier | null = null;
  /** The link formed on the current carrier. */
  #up = false;
  #closed = false;
  #epoch = 0;
  #claim = '';
  #server: ServerHello | null = null;
  #sendLimit = 256;
  #nextId = 0;
  readonly #pending = new Map<number, Pending>();
  #notices = new Set<string>();
  #attempt = 0;
  #timer: TimerHandle | undefined;
  #pingId = 0;
  #pingAt = -1;
  #first: { resolve(s: ServerHello): void; reject(e: LanemuxError): void } | null = null;
  /** Ended for good (reported once). */
  #done = false;

  constructor(o: LinkOptions, host: LinkHost) {
    this.#o = o;
    this.#host = host;
    this.#rt = o.runtime;
    this.#instance = randomHex(o.runtime, 8);
  }

  /** True while a link is formed. */
  get up(): boolean {
    return this.#up;
  }

  /** The server's HELLO of the current (or last) link. */
  get server(): ServerHello | null {
    return this.#server;
  }

  /** Largest message the server accepts from this page on the current link. */
  get sendLimit(): number {
    return this.#sendLimit;
  }

  /** Dial; resolves once the first link formed, rejects when the first attempt fails or times out. */
  start(): Promise<ServerHello> {
    return new Promise((resolve, reject) => {
      this.#first = { resolve, reject };
      const deadline = this.#rt.setTimer(
        () =>
          this.#failFirst(
            new TransportError(
              'ERR_CONNECT',
              `no lanemux link to ${this.#o.url} within ${this.#o.connectTimeoutMs} ms`,
            ),
          ),
        this.#o.connectTimeoutMs,
        true,
      );
      const settle = this.#first;
      this.#first = {
        resolve: (s) => {
          this.#rt.clearTimer(deadline);
          settle.resolve(s);
        },
        reject: (e) => {
          this.#rt.clearTimer(deadline);
          settle.reject(e);
        },
      };
      void this.#dial();
    });
  }

  #failFirst(e: LanemuxError): void {
    if (this.#first !== null) this.close(e);
  }

  async #dial(): Promise<void> {
    if (this.#closed) return;
    const o = this.#o;
    let carrier: Carrier;
    let credential: string | undefined;
    const session = Number(BigInt(`0x${randomHex(this.#rt, 7)}`) & 0x1f_ffff_ffff_ffffn);
    try {
      credential = typeof o.credential === 'function' ? await o.credential() : o.credential;
      carrier = await o.carrier(
        o.url,
        {
          message: (m) => {
            if (this.#carrier === carrier) this.#onMessage(m, session);
          },
          closed: (code, reason) => {
            if (this.#carrier === carrier)
              this.#lost(errorForClose(code, reason, o.url), TERMINAL_CLOSE_CODES.has(code));
          },
        },
        { timeoutMs: o.connectTimeoutMs, maxMessageSize: o.maxMessageSize, runtime: this.#rt },
      );
    } catch (e) {
      const error =
        e instanceof LanemuxError ? e : new TransportError('ERR_CONNECT', `could not reach ${o.url}: ${String(e)}`);
      // A first connect is not retried, nor a failure the carrier says no retry can change.
      if (this.#first !== null || !error.retryable) this.close(error);
      else this.#retry();
      return;
    }
    if (this.#closed) {
      carrier.close(1000, 'closed');
      return;
    }
    this.#carrier = carrier;
    const hello = encodeHello({
      protocolVersion: PROTOCOL_VERSION,
      worker: o.worker,
      instance: this.#instance,
      session,
      lane: 0,
      lanes: 1,
      maxMessageSize: o.maxMessageSize,
      keys: [RESUME_KEY, MESSENGER_MUX_KEY],
      window: o.window,
      credential,
      claim: this.#claim,
    });
    carrier.send(hello);
    this.#arm(o.connectTimeoutMs);
  }

  /** One message from the current carrier. */
  #onMessage(m: Uint8Array, session: number): void {
    if (m.byteLength > (this.#up ? this.#o.maxMessageSize : HELLO_FRAME_LIMIT)) {
      const limit = this.#up ? this.#o.maxMessageSize : HELLO_FRAME_LIMIT;
      return this.#fail(new TransportError('ERR_FRAME_TOO_LARGE', `a ${m.byteLength}-byte message, over ${limit}`));
    }
    if (!this.#up) {
      this.#onHello(m, session);
      return;
    }
    const kind = m[0];
    if (m.byteLength === 0) return this.#fail(malformed('an empty message'));
    if (kind === Kind.Batch) {
      this.#host.batch(m.subarray(1));
      return;
    }
    if (kind === KIND_GOAWAY) {
      const e = parseGoaway(m) ?? malformed('a GOAWAY that does not decode');
      this.#lost(e, e.code === 'ERR_CLOSED' ? false : !e.retryable);
      return;
    }
    if (kind === Kind.Ping || kind === Kind.Pong || kind === Kind.Cancel) {
      if (m.byteLength !== 5) return this.#fail(malformed(`a ${m.byteLength}-byte control message`));
      const id = readU32(m, 1);
      if (kind === Kind.Ping) this.#send(idHead(Kind.Pong, id));
      else if (kind === Kind.Pong && id === this.#pingId) this.#pingAt = -1;
      return;
    }
    if (kind === Kind.Message) {
      const n = m[1] ?? 0;
      const name = n === 0 || 2 + n > m.byteLength ? undefined : decodeName(m, 2, 2 + n);
      if (name === undefined) return this.#fail(malformed('a MESSAGE with a bad handler name'));
      if (!this.#host.message(name, m.subarray(2 + n))) this.#notice(name);
      return;
    }
    if (kind === Kind.Request) return this.#onRequest(m);
    if (kind === Kind.Response || kind === Kind.ErrorResponse) {
      if (m.byteLength < 6) return this.#fail(malformed('a reply shorter than 6 bytes'));
      const p = this.#pending.get(readU32(m, 1));
      if (p === undefined) return;
      this.#pending.delete(readU32(m, 1));
      this.#rt.clearTimer(p.timer);
      if (kind === Kind.Response) {
        try {
          p.resolve(decodeBounded(m.subarray(5)));
        } catch {
          p.reject(malformed('a reply that is not MessagePack'));
        }
        return;
      }
      const b = decodeErrorBody(m.subarray(5));
      if (b === undefined) p.reject(malformed('an error reply that does not validate'));
      else
        p.reject(new RemoteError(this.#server?.worker ?? '', b.code, b.message, { retryable: b.retryable ?? false }));
      return;
    }
    if (kind === Kind.Notice) {
      if (decodeErrorBody(m.subarray(1)) === undefined) this.#fail(malformed('a NOTICE that does not validate'));
      return;
    }
    this.#fail(malformed(`a message of kind 0x${(kind ?? 0).toString(16)}`));
  }

  #onHello(m: Uint8Array, session: number): void {
    if (m[0] === KIND_GOAWAY) {
      const e = parseGoaway(m) ?? malformed('a GOAWAY that does not decode');
      return this.#lost(e, !e.retryable);
    }
    const h = decodeHello(m, PROTOCOL_VERSION);
    if (h instanceof LanemuxError) return this.#fail(h, true);
    if (h.session !== session || h.lane !== 0 || h.lanes !== 1 || h.worker === this.#o.worker) {
      return this.#fail(new TransportError('ERR_HANDSHAKE', `the server's HELLO does not answer this page's`), true);
    }
    if (!h.keys.includes(MESSENGER_MUX_KEY)) {
      return this.#fail(new TransportError('ERR_HANDSHAKE', `the server does not speak ${MESSENGER_MUX_KEY}`), true);
    }
    this.#claim = h.claim ?? '';
    this.#up = true;
    this.#attempt = 0;
    this.#epoch++;
    this.#notices = new Set();
    this.#sendLimit = Math.min(h.maxMessageSize, this.#o.maxMessageSize);
    const server: ServerHello = {
      worker: h.worker,
      instance: h.instance,
      maxMessageSize: h.maxMessageSize,
      keys: h.keys,
    };
    this.#server = server;
    this.#pingAt = -1;
    this.#arm(this.#o.healthIntervalMs);
    this.#host.up(server, this.#epoch);
    const f = this.#first;
    this.#first = null;
    f?.resolve(server);
  }

  #onRequest(m: Uint8Array): void {
    if (m.byteLength < 7) return this.#fail(malformed('a REQUEST shorter than 7 bytes'));
    const id = readU32(m, 1);
    const n = m[5]!;
    const name = n === 0 || 6 + n > m.byteLength ? undefined : decodeName(m, 6, 6 + n);
    if (name === undefined) return this.#fail(malformed('a REQUEST with a bad handler name'));
    let reply: Uint8Array;
    try {
      const handled = this.#host.request(name, decodeBounded(m.subarray(6 + n)));
      if (handled === undefined) throw new LanemuxError('ERR_UNKNOWN_HANDLER', `no handler "${name}" on this page`);
      reply = join(idHead(Kind.Response, id), encodeShared(handled.answer));
    } catch (e) {
      const err = e instanceof LanemuxError ? e : new LanemuxError('ERR_MALFORMED_ENVELOPE', `bad request body: ${e}`);
      reply = join(
        idHead(Kind.ErrorResponse, id),
        encodeErrorBody({ code: err.code, message: err.message.slice(0, 4096), retryable: err.retryable }),
      );
    }
    this.#send(reply);
  }

  /** Tell the server once per link and name that nobody handles `name` (§4.5). */
  #notice(name: string): void {
    if (this.#notices.has(name) || this.#notices.size >= MAX_NOTICES) return;
    this.#notices.add(name);
    this.#send(
      join(
        Uint8Array.of(Kind.Notice),
        encodeErrorBody({ code: 'ERR_UNKNOWN_HANDLER', message: `no handler "${name}" on this page`, handler: name }),
      ),
    );
  }

  /** Send a BATCH. False when no link is up (the batch is dropped: its epoch is over). */
  sendBatch(payload: Uint8Array): boolean {
    return this.#send(join(Uint8Array.of(Kind.Batch), payload));
  }

  /** Send a MESSAGE. False when no link is up. */
  sendMessage(name: string, payload: Uint8Array): boolean {
    return this.#send(join(messageHead(encodeName(name)!), payload));
  }

  /**
   * A unary request on the current link. Rejects with the server's error (`RemoteError`), with
   * `ERR_PEER_GONE` (retryable) if the link is lost first, `ERR_TIMEOUT` after `timeoutMs`, and
   * `ERR_FRAME_TOO_LARGE` for a request over the link's message size.
   */
  request(name: string, body: unknown, timeoutMs = this.#o.requestTimeoutMs): Promise<unknown> {
    if (!this.#up) return Promise.reject(gone(`no link to ${this.#o.url}`));
    const nameBytes = encodeName(name);
    if (nameBytes === undefined) return Promise.reject(new LanemuxError('ERR_INVALID_ARGUMENT', `bad handler name`));
    let id = this.#nextId;
    do id = id >= 0xffff_ffff ? 1 : id + 1;
    while (this.#pending.has(id));
    this.#nextId = id;
    const message = join(requestHead(id, nameBytes), encodeShared(body));
    if (message.byteLength > this.#sendLimit) {
      return Promise.reject(
        new TransportError(
          'ERR_FRAME_TOO_LARGE',
          `a ${message.byteLength}-byte request is over the link's ${this.#sendLimit}-byte limit`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const timer = this.#rt.setTimer(() => {
        this.#pending.delete(id);
        this.#send(idHead(Kind.Cancel, id));
        reject(new LanemuxError('ERR_TIMEOUT', `"${name}" got no answer within ${timeoutMs} ms`, { retryable: true }));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      this.#send(message);
    });
  }

  #send(message: Uint8Array): boolean {
    return this.#up && this.#carrier !== null && this.#carrier.send(message);
  }

  /** The one timer: the hello deadline before the link forms, the health check after. */
  #arm(ms: number): void {
    if (this.#timer !== undefined) this.#rt.clearTimer(this.#timer);
    this.#timer = this.#rt.setTimer(this.#tick, ms);
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    if (this.#carrier === null) return;
    if (!this.#up) {
      this.#fail(
        new TransportError(
          'ERR_HANDSHAKE',
          `the server did not answer the HELLO within ${this.#o.connectTimeoutMs} ms`,
        ),
      );
      return;
    }
    if (this.#pingAt >= 0) {
      this.#fail(new LanemuxError('ERR_HEALTH_CHECK_FAILED', 'the server did not answer a PING', { retryable: true }));
      return;
    }
    this.#pingId = this.#pingId >= 0xffff_ffff ? 1 : this.#pingId + 1;
    this.#pingAt = this.#rt.now();
    this.#send(idHead(Kind.Ping, this.#pingId));
    this.#arm(this.#o.healthIntervalMs);
  };

  /** Close the carrier because of `error` (a GOAWAY says why first). */
  #fail(error: LanemuxError, final = false): void {
    const c = this.#carrier;
    if (c !== null) {
      c.send(encodeGoaway(error));
      const f = closeFrameFor(error);
      c.close(f.code, f.reason);
    }
    this.#lost(error, final || TERMINAL_CLOSE_CODES.has(closeFrameFor(error).code));
  }

  /** The carrier is gone: fail what waits on it, tell the client, and dial again unless final. */
  #lost(error: LanemuxError, final: boolean): void {
    const c = this.#carrier;
    this.#carrier = null;
    c?.close(1000, 'closed');
    if (this.#timer !== undefined) this.#rt.clearTimer(this.#timer);
    this.#timer = undefined;
    const wasUp = this.#up;
    this.#up = false;
    for (const p of this.#pending.values()) {
      this.#rt.clearTimer(p.timer);
      p.reject(this.#closed ? new LanemuxError('ERR_CLOSED', 'the client closed') : gone(error.message, error));
    }
    this.#pending.clear();
    // A first connect is not retried: the caller learns at once what is wrong at that address.
    if (final || this.#closed || this.#first !== null) {
      this.#closed = true;
      this.#finish(error);
      return;
    }
    if (wasUp) this.#host.down(error, false);
    this.#retry();
  }

  /** The link will not dial again: settle a waiting `start`, or tell the client. */
  #finish(error: LanemuxError): void {
    if (this.#done) return;
    this.#done = true;
    if (this.#timer !== undefined) this.#rt.clearTimer(this.#timer);
    this.#timer = undefined;
    const f = this.#first;
    this.#first = null;
    if (f !== null) f.reject(error);
    else this.#host.down(error, true);
  }

  #retry(): void {
    if (this.#closed || this.#timer !== undefined) return;
    const r = this.#o.reconnect;
    const delay = Math.min(r.maxDelayMs, r.initialDelayMs * (1 + randomFraction(this.#rt)) * r.factor ** this.#attempt);
    this.#attempt++;
    this.#timer = this.#rt.setTimer(() => {
      this.#timer = undefined;
      void this.#dial();
    }, delay);
  }

  /** Close for good: GOAWAY `ERR_CLOSED`, then the carrier. */
  close(error: LanemuxError = new LanemuxError('ERR_CLOSED', 'the client closed')): void {
    if (this.#closed) return;
    this.#closed = true;
    const c = this.#carrier;
    if (c === null) return this.#finish(error);
    if (this.#up) c.send(encodeGoaway(new LanemuxError('ERR_CLOSED', 'the page closed its client')));
    this.#lost(error, true);
  }
}

function join(head: Uint8Array, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(head.byteLength + body.byteLength);
  out.set(head);
  out.set(body, head.byteLength);
  return out;
}

function malformed(what: string): LanemuxError {
  return new TransportError('ERR_MALFORMED_ENVELOPE', `the server sent ${what}`);
}

function gone(message: string, cause?: unknown): LanemuxError {
  return new TransportError('ERR_PEER_GONE', message, { retryable: true, cause });
}
