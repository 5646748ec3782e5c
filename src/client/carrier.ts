/**
 * A carrier is one ordered, reliable message pipe from the page to its server: one WebSocket, or
 * one WebTransport stream (`webtransport.ts`). The client speaks lanemux over it (HELLO, envelope,
 * batches); the carrier only moves whole messages and says when the pipe is gone. A lost pipe is
 * never reopened by the carrier: the client dials a new one, with a new HELLO.
 *
 * The WebSocket carrier is the WHATWG `WebSocket` through partysocket (the global one in browsers,
 * Deno and Bun; pass `WebSocket` from `ws` on Node 20), configured so that lanemux owns every byte:
 * nothing is queued while closed, binary frames arrive as `ArrayBuffer`, and partysocket never
 * reconnects by itself.
 */
import ReconnectingWebSocket from 'partysocket/ws';
import { LanemuxError } from '../errors.ts';
import type { Runtime } from '../runtime/runtime.ts';

/** What a carrier reports. */
export interface CarrierEvents {
  /** One whole message arrived. */
  message(bytes: Uint8Array): void;
  /** The pipe closed, not by {@link Carrier.close}: a WebSocket close code (1006 when unknown) and reason. */
  closed(code: number, reason: string): void;
}

/** One open pipe. */
export interface Carrier {
  /** Send one whole message; false when the pipe is no longer open. */
  send(message: Uint8Array): boolean;
  /** Bytes handed to `send` that the pipe has not written yet. */
  readonly buffered: number;
  /** Close the pipe; no event follows. */
  close(code: number, reason: string): void;
}

/** What `connect` tells a carrier it opens. */
export interface CarrierOpen {
  /** Time the pipe has to open (`connect`'s `connectTimeoutMs`). */
  readonly timeoutMs: number;
  /** The largest message the page accepts (`connect`'s `maxMessageSize`): a carrier that frames refuses larger ones. */
  readonly maxMessageSize: number;
  /** The client's clock and timers. */
  readonly runtime: Runtime;
}

/**
 * Opens one pipe to `url`. Resolves once it is open; rejects with `ERR_CONNECT` when it does not
 * open within `open.timeoutMs` (retryable; a carrier that knows a retry cannot help says so with
 * `retryable: false`, and the client stops dialling).
 */
export type CarrierFactory = (url: string, events: CarrierEvents, open: CarrierOpen) => Promise<Carrier>;

/** A WHATWG-compatible WebSocket constructor. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => unknown;

/** The WebSocket carrier: `ws://` and `wss://` URLs. `WebSocket` defaults to the global one. */
export function webSocketCarrier(WebSocket?: WebSocketConstructor): CarrierFactory {
  return (url, events, { timeoutMs }) =>
    new Promise((resolve, reject) => {
      let open = false;
      let done = false;
      const ws = new ReconnectingWebSocket(url, undefined, {
        ...(WebSocket === undefined ? {} : { WebSocket }),
        maxEnqueuedMessages: 0,
        connectionTimeout: timeoutMs,
        maxRetries: 0,
        shouldReconnectOnClose: () => false,
      });
      ws.binaryType = 'arraybuffer';
      let why = '';
      const carrier: Carrier = {
        send: (m) => {
          if (done || ws.readyState !== 1) return false;
          ws.send(m as Uint8Array<ArrayBuffer>);
          return true;
        },
        get buffered() {
          return ws.bufferedAmount;
        },
        close: (code, reason) => {
          if (done) return;
          done = true;
          ws.close(code, reason);
        },
      };
      ws.addEventListener('open', () => {
        open = true;
        resolve(carrier);
      });
      ws.addEventListener('message', (ev: MessageEvent) => {
        if (done) return;
        const d: unknown = ev.data;
        if (d instanceof ArrayBuffer) events.message(new Uint8Array(d));
        // A text frame is malformed: an empty message is refused by the client as such.
        else events.message(new Uint8Array(0));
      });
      ws.addEventListener('error', (ev: unknown) => {
        const m = (ev as { message?: unknown }).message;
        if (typeof m === 'string' && m !== '') why = m;
      });
      ws.addEventListener('close', (ev: { code: number; reason: string }) => {
        if (done) return;
        done = true;
        if (open) events.closed(ev.code, ev.reason);
        else {
          // partysocket reports why a socket did not open in the error event that follows its close.
          queueMicrotask(() =>
            reject(
              new LanemuxError('ERR_CONNECT', `could not open a WebSocket to ${url}${why ? `: ${why}` : ''}`, {
                retryable: true,
              }),
            ),
          );
        }
      });
    });
}
