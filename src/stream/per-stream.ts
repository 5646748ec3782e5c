/**
 * The legacy per-stream path (docs/protocol.md §9): one
 * dedicated connection per stream, key `tcp-stream`. Kept as the fallback for peers without the
 * mux, as the rollback (`mux.enabled = false`), and as the benchmark baseline. The core talks to
 * it through this port; the Node TCP implementation lives in `src/adapters/node-tcp-stream.ts`.
 * The wire is docs/protocol.md §9.
 */
import type { LanemuxError } from '../errors.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { StreamError } from './errors.ts';

/** Where the consumer side of one per-stream connection delivers. */
export interface PerStreamSink {
  /** One StreamFrame body arrived. Return false to pause reading (the anchor buffer is full). */
  frame(body: Uint8Array): boolean;
  /** The connection ended (error null: clean end after the terminal). */
  end(error: LanemuxError | null): void;
  /** Set by the transport: the sink calls it when it can take frames again. */
  resume: (() => void) | null;
  /**
   * Set by the transport: the sink calls it to drop the connection (the anchor was cancelled or
   * failed, or its watchdog fired). The transport then ends the sink with this error.
   */
  abort?: ((error: LanemuxError) => void) | null;
  /**
   * Set by the transport (right after `accept` returns), where its wire can carry a stop: the sink
   * calls it to ask the producer to finish (`requestStop`). The first call per connection sends it;
   * later calls, and calls after the end, do nothing.
   */
  stop?: (() => void) | null;
}

/** The producer side of one per-stream connection. */
export interface PerStreamConnection {
  /** Write one StreamFrame body: true when the socket took it, else a promise of its drain. */
  write(body: Uint8Array): true | Promise<void>;
  /** End the stream after the last frame (graceful). */
  end(): void;
  /** Tear the connection down now. */
  destroy(error?: LanemuxError): void;
  /** Called once when the connection closes (error null: clean). */
  onClose(listener: (error: LanemuxError | null) => void): void;
  /**
   * Called once when the consumer asks the producer to stop (its `requestStop`). Optional: a
   * transport whose wire cannot carry a stop leaves it out.
   */
  onStop?(listener: () => void): void;
}

/** A per-stream transport: listener (consumer side) and dialer (producer side). */
export interface PerStreamTransport {
  /** The transport key (`tcp-stream`). */
  readonly key: string;
  /** Start listening; resolves with the endpoint consumers put in attach answers. */
  listen(accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null): Promise<string>;
  /** Dial a consumer's endpoint for (anchor, session). */
  connect(endpoint: string, anchorId: bigint, sessionId: bigint, options?: { signal?: AbortSignal }): Promise<PerStreamConnection>;
  /** Close the listener and every connection. */
  close(): Promise<void>;
  /** Writes made (one per frame on this path), for the coalescing ratio. */
  readonly writes: number;
}

/**
 * The consumer's heartbeat watchdog of one per-stream connection (docs/protocol.md §9, as the mux's
 * per slot, docs/protocol.md §10.8): after `windows` heartbeat windows in a row in which no frame arrived it fires
 * once, with the error the stream ends with. A window in which the consumer itself holds the
 * producer back (`excused`: its buffer is full, so the transport stopped reading) never counts:
 * such a producer cannot get a heartbeat through. One timer per connection, re-armed each window;
 * a frame only sets {@link alive}.
 */
export class PerStreamWatchdog {
  /** Set on every frame: the current window saw the producer. */
  alive = false;
  readonly #runtime: Runtime;
  readonly #intervalMs: number;
  readonly #windows: number;
  readonly #excused: () => boolean;
  readonly #fire: (error: LanemuxError) => void;
  #dead = 0;
  #timer: TimerHandle | null = null;
  #stopped = false;

  /**
   * @param intervalMs the heartbeat interval this consumer advertised (the window length)
   * @param windows dead windows before it fires (the mux's `detectionMultiplier`, 3 by default)
   */
  constructor(runtime: Runtime, intervalMs: number, windows: number, excused: () => boolean, fire: (error: LanemuxError) => void) {
    this.#runtime = runtime;
    this.#intervalMs = intervalMs;
    this.#windows = windows;
    this.#excused = excused;
    this.#fire = fire;
    this.#timer = runtime.setTimer(this.#tick, intervalMs);
  }

  readonly #tick = (): void => {
    this.#timer = null;
    if (this.#stopped) return;
    this.#dead = this.alive || this.#excused() ? 0 : this.#dead + 1;
    this.alive = false;
    if (this.#dead >= this.#windows) {
      this.#stopped = true;
      const ms = this.#dead * this.#intervalMs;
      // The mux watchdog's code: the producer is presumed gone, a new attach may succeed.
      this.#fire(new StreamError('ERR_SENDER_DROPPED', `no frame from the per-stream producer for ${this.#dead} heartbeat windows (${ms} ms)`, { retryable: true }));
      return;
    }
    this.#timer = this.#runtime.setTimer(this.#tick, this.#intervalMs);
  };

  /** The connection ended: no more windows. Idempotent. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) {
      this.#runtime.clearTimer(this.#timer);
      this.#timer = null;
    }
  }
}
