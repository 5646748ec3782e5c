/**
 * A keep-alive loop for stores whose leases are renewed by writing again (NATS KV, the static
 * store): `renew` every `intervalMs`, one at a time, each bounded by `timeoutMs`. A failed renewal
 * is reported and retried after a quarter of the interval, so a brief outage costs less than the TTL.
 */
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { bounded, toDiscoveryError } from './bounded.ts';
import type { DiscoveryError } from './errors.ts';

export class KeepAlive {
  readonly #runtime: Runtime;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  readonly #renew: () => Promise<void>;
  readonly #onFailure: (error: DiscoveryError) => void;
  readonly #what: string;
  #timer: TimerHandle | undefined;
  #running = false;
  #inFlight: Promise<void> | undefined;

  constructor(
    runtime: Runtime,
    intervalMs: number,
    timeoutMs: number,
    renew: () => Promise<void>,
    onFailure: (error: DiscoveryError) => void,
    what: string,
  ) {
    this.#what = what;
    this.#runtime = runtime;
    this.#intervalMs = intervalMs;
    this.#timeoutMs = timeoutMs;
    this.#renew = renew;
    this.#onFailure = onFailure;
  }

  /** Start (or restart) the loop: the first renewal comes one interval from now. */
  start(): void {
    this.stop();
    this.#running = true;
    this.#schedule(this.#intervalMs);
  }

  /** Stop the loop; a renewal in flight finishes, and nothing follows it. */
  stop(): void {
    this.#running = false;
    if (this.#timer !== undefined) this.#runtime.clearTimer(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Stop the loop and wait for a renewal in flight: a write that follows must not be overtaken by
   * an older record's renewal (which would bring back a replaced or removed record).
   */
  async halt(): Promise<void> {
    this.stop();
    await this.#inFlight;
  }

  #schedule(ms: number): void {
    this.#timer = this.#runtime.setTimer(() => {
      this.#timer = undefined;
      const tick = this.#tick();
      this.#inFlight = tick;
      void tick.finally(() => {
        if (this.#inFlight === tick) this.#inFlight = undefined;
      });
    }, ms);
  }

  async #tick(): Promise<void> {
    let next = this.#intervalMs;
    try {
      await bounded(this.#runtime, this.#renew(), this.#timeoutMs, this.#what);
    } catch (e) {
      next = Math.max(250, Math.floor(this.#intervalMs / 4));
      if (this.#running) this.#onFailure(toDiscoveryError(e, this.#what));
    }
    if (this.#running && this.#timer === undefined) this.#schedule(next);
  }
}
