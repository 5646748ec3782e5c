/**
 * Unary calls (docs/protocol.md §4.3): `request` with its pending table, timeout, AbortSignal and
 * CANCEL on the caller's side; on the callee's side REQUEST runs its handler (bounded per peer by
 * `maxInflightRequests`) and answers RESPONSE or ERROR_RESPONSE unless the caller cancelled.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import { TransportError, describeThrown } from '../transport/errors.ts';
import { minEncodedSize } from '../wire/msgpack.ts';
import { decodeBody, encodeBody } from './body-codec.ts';
import { swallow, tooLarge } from './admission.ts';
import {
  Kind,
  decodeErrorBody,
  decodeName,
  encodeErrorBody,
  encodeName,
  idHead,
  isReservedName,
  readU32,
  requestHead,
} from './envelope.ts';
import { MessengerError, RemoteError } from './errors.ts';
import type { Faults } from './faults.ts';
import type { Handlers, RegisteredHandler } from './handlers.ts';
import type { ResolvedOptions } from './options.ts';
import { abortInflight, type Inflight, type PeerState, type PendingRequest } from './peer-state.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { checkTimeout } from './call-timeout.ts';
import type { PeerId, UnsignalledRequestHandler } from './types.ts';

/** Both sides of unary calls for one messenger. */
export class Unary {
  readonly #o: ResolvedOptions;
  readonly #rt: Runtime;
  readonly #selfId: PeerId;
  /** Request handlers by name (the registry's own map). */
  readonly #handlers: Map<string, RegisteredHandler>;
  readonly #faults: Faults;
  /** Outstanding `request` calls toward every peer (bounded by `maxPendingRequests`). */
  #pendingRequests = 0;

  constructor(o: ResolvedOptions, rt: Runtime, selfId: PeerId, handlers: Handlers, faults: Faults) {
    this.#o = o;
    this.#rt = rt;
    this.#selfId = selfId;
    this.#handlers = handlers.requests;
    this.#faults = faults;
  }

  /** `Messenger.request` toward `st` (the composition resolved `peer` to it). */
  request(
    st: PeerState,
    peer: PeerId,
    name: string,
    body: unknown,
    options: { timeoutMs?: number; signal?: AbortSignal },
  ): Promise<unknown> {
    const signal = options.signal;
    if (signal?.aborted)
      return Promise.reject(
        new MessengerError('ERR_ABORTED', `request "${name}" to ${peer} aborted before it was sent`, {
          cause: signal.reason,
        }),
      );
    const nameBytes = isReservedName(name) ? undefined : encodeName(name);
    if (nameBytes === undefined)
      return Promise.reject(
        new MessengerError('ERR_INVALID_HANDLER', `cannot send a request to handler name ${JSON.stringify(name)}`),
      );
    const timeoutMs = options.timeoutMs ?? this.#o.requestTimeoutMs;
    const badTimeout = checkTimeout(`request "${name}"`, timeoutMs);
    if (badTimeout !== undefined) return Promise.reject(badTimeout);
    if (this.#pendingRequests >= this.#o.maxPendingRequests) {
      return Promise.reject(
        new MessengerError('ERR_BUSY', `${this.#pendingRequests} requests are already pending (maxPendingRequests)`, {
          retryable: true,
        }),
      );
    }
    // Refuse a body that cannot fit before the encoder grows a buffer for it (6 = kind, id, name length).
    const least = 6 + nameBytes.byteLength + minEncodedSize(body);
    if (least > st.link.maxMessageSize) return Promise.reject(tooLarge(least, st));
    let encoded: Uint8Array;
    try {
      encoded = encodeBody(body);
    } catch (cause) {
      return Promise.reject(
        new MessengerError(
          'ERR_INVALID_ARGUMENT',
          `request body for "${name}" cannot be encoded as MessagePack: ${describeThrown(cause)}`,
          { cause },
        ),
      );
    }
    const id = st.allocId(st.requests);
    const head = requestHead(id, nameBytes);
    const size = head.byteLength + encoded.byteLength;
    if (size > st.link.maxMessageSize) return Promise.reject(tooLarge(size, st));
    // Copies `encoded` (a view of the shared encoder buffer) before anything else is encoded.
    st.activity++;
    const admission = st.link.send(0, head, encoded);

    return new Promise<unknown>((resolve, reject) => {
      this.#pendingRequests++;
      let timer: TimerHandle | undefined;
      const settle = (): boolean => {
        if (st.requests.get(id) !== pending) return false;
        st.requests.delete(id);
        this.#pendingRequests--;
        if (timer !== undefined) this.#rt.clearTimer(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const giveUp = (error: LanemuxError): void => {
        if (!settle()) return;
        // Tell the peer so its handler's AbortSignal fires; best effort.
        if (!st.dead) swallow(st.link.send(0, idHead(Kind.Cancel, id)));
        reject(error);
      };
      const onAbort = (): void =>
        giveUp(new MessengerError('ERR_ABORTED', `request "${name}" to ${peer} aborted`, { cause: signal?.reason }));
      const pending: PendingRequest = {
        name,
        resolve: (value) => {
          if (settle()) resolve(value);
        },
        reject: (error) => {
          if (settle()) reject(error);
        },
      };
      st.requests.set(id, pending);
      timer = this.#rt.setTimer(
        () =>
          giveUp(
            new MessengerError('ERR_TIMEOUT', `request "${name}" to ${peer} got no reply within ${timeoutMs} ms`, {
              retryable: true,
            }),
          ),
        timeoutMs,
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      if (admission !== true) admission.catch((error: LanemuxError) => pending.reject(error));
    });
  }

  /** A REQUEST from the peer: run its handler and reply on the lane it came on (docs/protocol.md §4.3). */
  onRequest(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength < 7) return this.#faults.malformed(st, lane, 'REQUEST too short');
    const id = readU32(bytes, 1);
    const n = bytes[5] as number;
    const name = n === 0 || bytes.byteLength < 6 + n ? undefined : decodeName(bytes, 6, 6 + n);
    if (name === undefined) return this.#faults.malformed(st, lane, 'REQUEST with a bad handler name');
    const handler = this.#handlers.get(name);
    if (handler === undefined) {
      this.#faults.counts.unknownHandler++;
      this.#replyError(
        st,
        lane,
        id,
        'ERR_UNKNOWN_HANDLER',
        `no request handler named "${name}" on worker ${this.#selfId}`,
        false,
      );
      return;
    }
    if (st.inflight.has(id)) {
      return this.#faults.malformed(st, lane, `REQUEST id ${id} reused while its handler still runs`);
    }
    if (st.inflight.size >= this.#o.maxInflightRequests) {
      this.#replyError(
        st,
        lane,
        id,
        'ERR_BUSY',
        `worker ${this.#selfId} already runs ${st.inflight.size} requests from you`,
        true,
      );
      return;
    }
    let body: unknown;
    try {
      body = decodeBody(bytes.subarray(6 + n));
    } catch (cause) {
      this.#replyError(
        st,
        lane,
        id,
        'ERR_MALFORMED_ENVELOPE',
        `request body for "${name}" is not valid MessagePack: ${describeThrown(cause)}`,
        false,
      );
      return;
    }
    // A handler registered with `signal: false` is called without one: no AbortController per
    // request (the node's attach handlers); a cancel still stops the reply.
    const controller = handler.signal ? new AbortController() : null;
    const entry: Inflight = { controller, aborted: false };
    st.inflight.set(id, entry);
    let result: unknown;
    try {
      result =
        controller === null
          ? (handler.fn as UnsignalledRequestHandler)(st.id, body)
          : handler.fn(st.id, body, controller.signal);
    } catch (error) {
      st.inflight.delete(id);
      this.#replyThrown(st, lane, id, name, error);
      return;
    }
    if (isThenable(result)) {
      result.then(
        (value) => {
          if (st.inflight.get(id) !== entry) return;
          st.inflight.delete(id);
          if (!entry.aborted) this.#replyValue(st, lane, id, name, value);
        },
        (error: unknown) => {
          if (st.inflight.get(id) !== entry) return;
          st.inflight.delete(id);
          if (!entry.aborted) this.#replyThrown(st, lane, id, name, error);
        },
      );
    } else {
      st.inflight.delete(id);
      this.#replyValue(st, lane, id, name, result);
    }
  }

  #replyValue(st: PeerState, lane: number, id: number, name: string, value: unknown): void {
    if (st.dead) return;
    const least = 5 + minEncodedSize(value);
    if (least > st.link.maxMessageSize) {
      this.#replyError(
        st,
        lane,
        id,
        'ERR_FRAME_TOO_LARGE',
        `the result of "${name}" is at least ${least} bytes, over the ${st.link.maxMessageSize}-byte limit`,
        false,
      );
      return;
    }
    let encoded: Uint8Array;
    try {
      encoded = encodeBody(value);
    } catch (cause) {
      this.#replyError(
        st,
        lane,
        id,
        'ERR_HANDLER_FAILED',
        `the result of "${name}" cannot be encoded as MessagePack: ${describeThrown(cause)}`,
        false,
      );
      return;
    }
    const size = 5 + encoded.byteLength;
    if (size > st.link.maxMessageSize) {
      this.#replyError(
        st,
        lane,
        id,
        'ERR_FRAME_TOO_LARGE',
        `the result of "${name}" is ${size} bytes, over the ${st.link.maxMessageSize}-byte limit`,
        false,
      );
      return;
    }
    swallow(st.link.send(lane, idHead(Kind.Response, id), encoded));
  }

  #replyThrown(st: PeerState, lane: number, id: number, name: string, error: unknown): void {
    if (isLanemuxErrorSafe(error)) {
      this.#replyError(st, lane, id, error.code, error.message, error.retryable);
      return;
    }
    // Not a LanemuxError: a bug in the handler. Report it here too; send only the message.
    this.#faults.reportError('handler', error, st.id, name);
    const message = describeThrown(error);
    this.#replyError(st, lane, id, 'ERR_HANDLER_FAILED', `handler "${name}" failed: ${message}`, false);
  }

  #replyError(st: PeerState, lane: number, id: number, code: string, message: string, retryable: boolean): void {
    if (st.dead) return;
    swallow(
      st.link.send(
        lane,
        idHead(Kind.ErrorResponse, id),
        encodeErrorBody({ code: code.slice(0, 64), message: message.slice(0, 4096), retryable }),
      ),
    );
  }

  /** A RESPONSE or ERROR_RESPONSE: settle the pending request, if still pending. */
  onReply(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength < 6) return this.#faults.malformed(st, lane, 'reply too short');
    const id = readU32(bytes, 1);
    const pending = st.requests.get(id);
    if (pending === undefined) {
      this.#faults.counts.lateReplies++;
      return;
    }
    if (bytes[0] === Kind.Response) {
      let value: unknown;
      try {
        value = decodeBody(bytes.subarray(5));
      } catch (cause) {
        pending.reject(
          new TransportError(
            'ERR_MALFORMED_ENVELOPE',
            `reply to "${pending.name}" from ${st.id} is not valid MessagePack`,
            { cause },
          ),
        );
        return;
      }
      pending.resolve(value);
      return;
    }
    const body = decodeErrorBody(bytes.subarray(5));
    if (body === undefined) {
      pending.reject(
        new TransportError('ERR_MALFORMED_ENVELOPE', `error reply to "${pending.name}" from ${st.id} is malformed`),
      );
      return;
    }
    pending.reject(
      new RemoteError(st.id, body.code, `${pending.name} on ${st.id}: ${body.message}`, {
        retryable: body.retryable ?? false,
      }),
    );
  }

  /** A CANCEL: the caller gave up; abort the handler's signal (its reply is then not sent). */
  onCancel(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength !== 5) return this.#faults.malformed(st, lane, 'CANCEL of the wrong length');
    abortInflight(
      st.inflight.get(readU32(bytes, 1)),
      new MessengerError('ERR_ABORTED', 'the caller cancelled the request'),
    );
  }
}

/** `instanceof LanemuxError` that cannot throw (a thrown proxy may trap `getPrototypeOf`). */
function isLanemuxErrorSafe(v: unknown): v is LanemuxError {
  try {
    return v instanceof LanemuxError;
  } catch {
    return false;
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  if (typeof v !== 'object' || v === null) return false;
  try {
    return typeof (v as { then?: unknown }).then === 'function';
  } catch {
    // A result whose `then` getter throws is not awaited; encoding it then fails and is reported.
    return false;
  }
}
