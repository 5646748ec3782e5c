/**
 * The handler tables: fire-and-forget handlers and request handlers by name, and the mux's batch
 * ingress by lane; registration checks names here (the reserved `_stream_batch[.k]` names only
 * through `registerBatchHandler`, docs/protocol.md §4.1–§4.2).
 *
 * @packageDocumentation
 */
import { MAX_LANES } from '../transport/port.ts';
import { encodeName, isReservedName } from './envelope.ts';
import { MessengerError } from './errors.ts';
import type { HandleOptions, MessageHandler, RequestHandler, UnsignalledRequestHandler } from './types.ts';

/** A registered request handler and whether it takes an AbortSignal of its own. */
export interface RegisteredHandler {
  readonly fn: RequestHandler | UnsignalledRequestHandler;
  readonly signal: boolean;
}

/** The handler tables of one messenger. */
export class Handlers {
  /** Fire-and-forget handlers (MESSAGE) by name. */
  readonly messages = new Map<string, MessageHandler>();
  /** Request handlers (REQUEST) by name. */
  readonly requests = new Map<string, RegisteredHandler>();
  /** The mux's ingress (BATCH), index = lane. Filled in place, never replaced. */
  readonly batch: (MessageHandler | undefined)[] = new Array<MessageHandler | undefined>(MAX_LANES).fill(undefined);

  on(name: string, handler: MessageHandler): void {
    this.#checkName(name);
    if (this.requests.has(name) || this.messages.has(name)) {
      throw new MessengerError('ERR_INVALID_HANDLER', `a handler named "${name}" is already registered`);
    }
    this.messages.set(name, handler);
  }

  registerBatchHandler(lane: number, handler: MessageHandler): void {
    if (!Number.isInteger(lane) || lane < 0 || lane >= MAX_LANES) {
      throw new MessengerError('ERR_INVALID_ARGUMENT', `batch lane ${lane} is outside 0..${MAX_LANES - 1}`);
    }
    this.batch[lane] = handler;
  }

  handle(name: string, handler: RequestHandler | UnsignalledRequestHandler, options: HandleOptions): void {
    this.#checkName(name);
    if (this.requests.has(name) || this.messages.has(name)) {
      throw new MessengerError('ERR_INVALID_HANDLER', `a handler named "${name}" is already registered`);
    }
    this.requests.set(name, { fn: handler, signal: options.signal ?? true });
  }

  #checkName(name: string): void {
    if (isReservedName(name)) {
      throw new MessengerError('ERR_INVALID_HANDLER', `"${name}" is reserved for the mux; use registerBatchHandler`);
    }
    if (typeof name !== 'string' || encodeName(name) === undefined) {
      throw new MessengerError(
        'ERR_INVALID_HANDLER',
        `handler names are 1..255 bytes of UTF-8, got ${JSON.stringify(name)}`,
      );
    }
  }
}
