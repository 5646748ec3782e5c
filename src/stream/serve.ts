/**
 * `node.serve(method, handler)`: the server half of a call (docs/protocol.md §8.6). A call arrives as
 * one unary request carrying the caller's anchor handle and zero-RTT ticket; the node opens the
 * stream from the ticket, answers the request at once (the acceptance), and runs the handler with
 * the stream's sender: its return finishes the stream, its throw fails it with a record the caller
 * turns into a typed error. Concurrency and request size are bounded per served method.
 */
import * as z from '../schema.ts';
import type { Messenger, PeerId } from '../messenger/types.ts';
import { int, parseOptions } from '../validate.ts';
import { ConfigError } from '../errors.ts';
import { decodeBounded } from '../wire/msgpack.ts';
import { encodeName } from '../messenger/envelope.ts';
import { CALL_PREFIX, CALL_VERSION, CallError, MAX_METHOD_BYTES, encodeFailure } from './call-envelope.ts';
import { parseHandle, workerKey } from './handle.ts';
import type { ProducerSide } from './producer.ts';
import type { StreamSender } from './sender.ts';

/** Options of `node.serve`. Every limit is per served method. */
export interface ServeOptions {
  /** Calls of this method that may run at once for one peer, 1..1,048,576. Defaults to 256. */
  readonly maxCallsPerPeer?: number;
  /** Calls of this method that may run at once on this node, all peers together, 1..1,048,576. Defaults to 4,096. */
  readonly maxCalls?: number;
  /** Largest request, as encoded MessagePack bytes, 1..16,777,216. Defaults to 65,536 (64 KiB). */
  readonly maxRequestBytes?: number;
}

/** Defaults of {@link ServeOptions}. */
export const SERVE_DEFAULTS = Object.freeze({ maxCallsPerPeer: 256, maxCalls: 4096, maxRequestBytes: 64 * 1024 });

/** What a handler is told besides its request and sender. */
export interface CallContext {
  /**
   * Aborts when the caller cancels, the caller's node goes away (past the resume window, when
   * resume is on), or this node closes: the handler should stop and return.
   */
  readonly signal: AbortSignal;
  /** The caller's peer id (worker id, hex). */
  readonly peer: PeerId;
  /** The method called. */
  readonly method: string;
}

/**
 * A served method: streams its answer to `request` through `sender`. Resolving finishes the stream
 * (unless the handler ended it itself); throwing fails it: the caller's iteration rejects with a
 * `CallError` carrying the thrown `LanemuxError`'s code, or `ERR_HANDLER_FAILED`.
 */
export type CallHandler<Req = unknown, T = unknown> = (
  request: Req,
  sender: StreamSender<T>,
  context: CallContext,
) => unknown;

const optionsSchema = z.strictObject({
  maxCallsPerPeer: z.optional(int(1, 1 << 20)),
  maxCalls: z.optional(int(1, 1 << 20)),
  maxRequestBytes: z.optional(int(1, 1 << 24)),
});

/** How the serve table opens the caller's stream: the node's producer side. */
export type StreamOpener = Pick<ProducerSide, 'attachAnchor' | 'openAnchorStream'>;

/** One served method: its handler, limits and the calls it runs. */
interface Served {
  readonly fn: CallHandler;
  readonly maxPerPeer: number;
  readonly max: number;
  readonly maxBytes: number;
  running: number;
  readonly perPeer: Map<PeerId, number>;
}

const noop = (): void => {};

/** The methods one node serves. */
export class ServeTable {
  readonly #messenger: Messenger;
  readonly #opener: StreamOpener;
  readonly #methods = new Map<string, Served>();
  /** Messenger handlers registered so far (a messenger cannot unregister: an unserved name answers unknown). */
  readonly #registered = new Set<string>();

  constructor(messenger: Messenger, opener: StreamOpener) {
    this.#messenger = messenger;
    this.#opener = opener;
  }

  serve(method: string, fn: CallHandler, options?: ServeOptions): () => void {
    if (typeof method !== 'string' || method === '' || (encodeName(method)?.byteLength ?? 256) > MAX_METHOD_BYTES)
      throw new ConfigError('method', `a method name is 1..${MAX_METHOD_BYTES} bytes of UTF-8`, { where: 'serve' });
    if (typeof fn !== 'function')
      throw new ConfigError('handler', 'the handler must be a function', { where: 'serve' });
    const o = parseOptions(optionsSchema, options, 'serve');
    if (this.#methods.has(method))
      throw new ConfigError('method', `"${method}" is already served (call its disposer first)`, { where: 'serve' });
    const served: Served = {
      fn,
      maxPerPeer: o.maxCallsPerPeer ?? SERVE_DEFAULTS.maxCallsPerPeer,
      max: o.maxCalls ?? SERVE_DEFAULTS.maxCalls,
      maxBytes: o.maxRequestBytes ?? SERVE_DEFAULTS.maxRequestBytes,
      running: 0,
      perPeer: new Map(),
    };
    if (!this.#registered.has(method)) {
      this.#messenger.handle(CALL_PREFIX + method, (from, body) => this.#onCall(method, from, body), {
        signal: false,
      });
      this.#registered.add(method);
    }
    this.#methods.set(method, served);
    // Calls under way go on; new ones are refused ERR_UNKNOWN_METHOD.
    return () => {
      if (this.#methods.get(method) === served) this.#methods.delete(method);
    };
  }

  async #onCall(method: string, from: PeerId, body: unknown): Promise<unknown> {
    const s = this.#methods.get(method);
    if (s === undefined) throw new CallError('ERR_UNKNOWN_METHOD', method, `no method "${method}" is served here`);
    const req = readCall(method, from, body);
    if (req.r.byteLength > s.maxBytes)
      throw new CallError(
        'ERR_REQUEST_TOO_LARGE',
        method,
        `the request is ${req.r.byteLength} bytes, over the ${s.maxBytes}-byte limit of "${method}"`,
      );
    const mine = s.perPeer.get(from) ?? 0;
    if (mine >= s.maxPerPeer || s.running >= s.max)
      throw new CallError(
        'ERR_CALL_LIMIT',
        method,
        mine >= s.maxPerPeer
          ? `"${method}" already runs ${mine} calls from you (maxCallsPerPeer)`
          : `"${method}" already runs ${s.running} calls (maxCalls)`,
        { retryable: true },
      );
    let request: unknown;
    try {
      request = decodeBounded(req.r);
    } catch (cause) {
      throw new CallError('ERR_INVALID_REQUEST', method, 'the request is not valid MessagePack', { cause });
    }
    // Counted from here, so calls whose streams are still opening count against the limits too.
    s.running++;
    s.perPeer.set(from, mine + 1);
    let sender: StreamSender<unknown>;
    try {
      // Without a ticket (the caller has no mux) the stream is attached: one more round trip.
      sender = await (req.t === undefined
        ? this.#opener.attachAnchor(req.h)
        : this.#opener.openAnchorStream(req.h, req.t));
    } catch (e) {
      release(s, from);
      throw e;
    }
    void run(s, method, from, request, sender);
    return { v: CALL_VERSION };
  }
}

/**
 * @internal The request envelope (peer input), or `ERR_INVALID_REQUEST` (`ERR_INVALID_HANDLE` for a
 * handle that is not one); the handle must name the caller's own anchor.
 */
export function readCall(
  method: string,
  from: PeerId,
  body: unknown,
): { h: string; t: string | undefined; r: Uint8Array } {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const { v, h, t, r } = b;
  const bad = (why: string): CallError => new CallError('ERR_INVALID_REQUEST', method, `malformed call: ${why}`);
  if (v !== CALL_VERSION) throw bad(`version ${String(v).slice(0, 16)} (this node speaks ${CALL_VERSION})`);
  if (typeof h !== 'string') throw bad('no anchor handle');
  if (t !== undefined && (typeof t !== 'string' || t.length > 1024)) throw bad('the ticket is not a string');
  if (!(r instanceof Uint8Array)) throw bad('the request is not MessagePack bytes');
  // Opening a stream to someone else's anchor on the caller's say-so is refused.
  if (workerKey(parseHandle(h).workerId) !== from) throw bad('the handle names an anchor of another worker');
  return { h, t, r };
}

function release(s: Served, from: PeerId): void {
  s.running--;
  const n = (s.perPeer.get(from) ?? 1) - 1;
  if (n > 0) s.perPeer.set(from, n);
  else s.perPeer.delete(from);
}

/** Run the handler to its end; finish or fail the stream; free the call's place. */
async function run(s: Served, method: string, from: PeerId, request: unknown, sender: StreamSender<unknown>) {
  try {
    await s.fn(request, sender, { signal: sender.cancelSignal, peer: from, method });
    if (!sender.closed) await sender.finalize();
  } catch (e) {
    // A stream that already ended (cancelled, lost, finished by the handler) has no one to tell.
    if (!sender.closed) {
      sender.error(encodeFailure(e)).catch(noop);
      sender.finalize().catch(noop);
    }
  } finally {
    release(s, from);
  }
}
