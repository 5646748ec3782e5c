/**
 * The legacy per-stream path (docs/protocol.md §9): one
 * dedicated connection per stream, key `tcp-stream`. Kept as the fallback for peers without the
 * mux, as the rollback (`mux.enabled = false`), and as the benchmark baseline. The core talks to
 * it through the port of `transport/per-stream-port.ts`; this file holds the consumer's watchdog.
 */
import type { LanemuxError } from '../errors.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { ResumeFailedError, StreamError } from './errors.ts';

export type { PerStreamSink, PerStreamConnection, PerStreamTransport } from '../transport/per-stream-port.ts';

/**
 * How a node with resume on ends a per-stream stream whose connection was lost before its terminal
 * (docs/protocol.md §8.3): the path cannot resume, and says so — retryable, `ERR_SENDER_DROPPED`,
 * reason `unsupported`. `cause`: the connection's own error, if any.
 */
export function perStreamLost(cause: LanemuxError | null): ResumeFailedError {
  const why = cause === null ? 'the connection closed before the stream ended' : cause.message;
  return new ResumeFailedError(
    'ERR_SENDER_DROPPED',
    'unsupported',
    `the per-stream path (tcp-stream) does not resume a lost connection: ${why}`,
    cause === null ? {} : { cause },
  );
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
  constructor(
    runtime: Runtime,
    intervalMs: number,
    windows: number,
    excused: () => boolean,
    fire: (error: LanemuxError) => void,
  ) {
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
      this.#fire(
        new StreamError(
          'ERR_SENDER_DROPPED',
          `no frame from the per-stream producer for ${this.#dead} heartbeat windows (${ms} ms)`,
          { retryable: true },
        ),
      );
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
