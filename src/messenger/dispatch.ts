/**
 * Ordered dispatch (docs/protocol.md §5): each message of a link goes to its handler synchronously,
 * in the transport's read path, so handlers run one at a time per (sender, lane) in arrival order.
 * Ordered handlers must not await; one that throws is counted and reported through `onError`, and
 * the link carries on. BATCH is the hot path (one per mux batch): a lane-indexed table lookup and
 * the call, nothing allocated but the payload's subarray view.
 *
 * @packageDocumentation
 */
import { BATCH_ENVELOPE_BYTES, BATCH_HANDLER_NAMES, Kind, decodeName } from './envelope.ts';
import type { Faults } from './faults.ts';
import type { Handlers } from './handlers.ts';
import type { Health } from './health.ts';
import type { PeerState } from './peer-state.ts';
import type { MessageHandler } from './types.ts';
import type { Unary } from './unary.ts';

/** Routes each received message to its handler or to the part of the messenger that owns its kind. */
export class Dispatcher {
  /** The registry's own tables, held here so the hot path reads them directly. */
  readonly #batchHandlers: (MessageHandler | undefined)[];
  readonly #handlers: Map<string, MessageHandler>;
  readonly #unary: Unary;
  readonly #health: Health;
  readonly #faults: Faults;

  constructor(handlers: Handlers, unary: Unary, health: Health, faults: Faults) {
    this.#batchHandlers = handlers.batch;
    this.#handlers = handlers.messages;
    this.#unary = unary;
    this.#health = health;
    this.#faults = faults;
  }

  /** One message from `st` on `lane`. Synchronous: this is the ordered dispatch. */
  dispatch(st: PeerState, lane: number, bytes: Uint8Array): void {
    switch (bytes[0]) {
      case Kind.Batch: {
        const handler = this.#batchHandlers[lane];
        if (handler === undefined) {
          this.#faults.unknown(st, BATCH_HANDLER_NAMES[lane] as string);
          return;
        }
        this.#call(handler, st, lane, bytes.subarray(BATCH_ENVELOPE_BYTES), BATCH_HANDLER_NAMES[lane] as string);
        return;
      }
      case Kind.Message: {
        const n = bytes[1] ?? 0;
        const name = n === 0 || bytes.byteLength < 2 + n ? undefined : decodeName(bytes, 2, 2 + n);
        if (name === undefined) return this.#faults.malformed(st, lane, 'MESSAGE with a bad handler name');
        const handler = this.#handlers.get(name);
        if (handler === undefined) {
          this.#faults.unknown(st, name);
          return;
        }
        this.#call(handler, st, lane, bytes.subarray(2 + n), name);
        return;
      }
      case Kind.Request:
        return this.#unary.onRequest(st, lane, bytes);
      case Kind.Response:
      case Kind.ErrorResponse:
        return this.#unary.onReply(st, lane, bytes);
      case Kind.Cancel:
        return this.#unary.onCancel(st, lane, bytes);
      case Kind.Ping:
        return this.#health.onPing(st, lane, bytes);
      case Kind.Pong:
        return this.#health.onPong(st, lane, bytes);
      case Kind.Notice:
        return this.#faults.onNotice(st, lane, bytes);
      default:
        return this.#faults.malformed(
          st,
          lane,
          `unknown message kind 0x${(bytes[0] ?? 0).toString(16).padStart(2, '0')}`,
        );
    }
  }

  #call(handler: MessageHandler, st: PeerState, lane: number, payload: Uint8Array, name: string): void {
    try {
      handler(st.id, lane, payload);
    } catch (error) {
      this.#faults.reportError('handler', error, st.id, name);
    }
  }
}
