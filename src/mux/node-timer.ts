/**
 * A node mux's one timer (docs/protocol.md §10.8): armed for the next sweep or the earliest
 * heartbeat due, whichever is first, so a stream beats at its interval (up to a tenth early, when
 * that lets it share a wake), not on the sweep tick, and there is never a timer per stream. The
 * sweep runs one interval after the timer is first armed, again while the node has work.
 */
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import type { HeartbeatSchedule, HeartbeatSender } from './heartbeats.ts';

export class NodeTimer {
  readonly #runtime: Runtime;
  readonly #interval: number;
  readonly #sweep: () => void;
  readonly #hasWork: () => boolean;
  /** The producers' heartbeats; null on a mux that never produces (a client's). */
  readonly #heartbeats: HeartbeatSchedule | null;
  #timer: TimerHandle | null = null;
  #timerAt = Number.NaN;
  /** When the next sweep runs (NaN: none scheduled). */
  #sweepDue = Number.NaN;
  #closed = false;

  /**
   * `sweep` runs every `interval` ms while `hasWork()` (or a heartbeat is registered) after a tick;
   * `armSweep()` starts it again when work appears. `heartbeats`: the schedule of a producing mux.
   */
  constructor(
    runtime: Runtime,
    interval: number,
    sweep: () => void,
    hasWork: () => boolean,
    heartbeats: HeartbeatSchedule | null,
  ) {
    this.#heartbeats = heartbeats;
    this.#runtime = runtime;
    this.#interval = interval;
    this.#sweep = sweep;
    this.#hasWork = hasWork;
  }

  /** Arm the timer if it is not armed (the sweep is due one interval from now). */
  armSweep(): void {
    if (this.#timer !== null || this.#closed) return;
    this.#arm();
  }

  /**
   * Register a producer for heartbeats at its consumer-advertised interval (at least
   * `HEARTBEAT_FLOOR_MS`); the first is due one interval from now.
   */
  addHeartbeat(sender: HeartbeatSender): void {
    if (this.#closed || this.#heartbeats === null) return;
    const due = this.#heartbeats.add(sender, this.#runtime.now());
    if (!Number.isNaN(due) && (this.#timer === null || due < this.#timerAt)) this.#arm();
  }

  removeHeartbeat(sender: HeartbeatSender): void {
    this.#heartbeats?.remove(sender);
  }

  /** Send the heartbeats due at `now` (the sweep's share; the timer sends those due between sweeps). */
  beat(now: number): void {
    const hb = this.#heartbeats;
    if (hb !== null && hb.size > 0) hb.run(now);
  }

  /** Stop for good: no timer, no heartbeats. */
  close(): void {
    this.#closed = true;
    if (this.#timer !== null) this.#runtime.clearTimer(this.#timer);
    this.#timer = null;
    this.#heartbeats?.clear();
  }

  /** True while a producer is registered for heartbeats. */
  get #beating(): boolean {
    return this.#heartbeats !== null && this.#heartbeats.size > 0;
  }

  /** (Re)arm the timer for the next sweep or the earliest heartbeat, whichever is first. */
  #arm(): void {
    if (this.#closed) return;
    const now = this.#runtime.now();
    if (Number.isNaN(this.#sweepDue)) this.#sweepDue = now + this.#interval;
    const at = this.#heartbeats === null ? this.#sweepDue : Math.min(this.#sweepDue, this.#heartbeats.next());
    if (this.#timer !== null) {
      if (this.#timerAt <= at) return;
      this.#runtime.clearTimer(this.#timer);
    }
    this.#timerAt = at;
    this.#timer = this.#runtime.setTimer(this.#onTimer, Math.max(0, at - now));
  }

  #onTimer = (): void => {
    this.#timer = null;
    this.#timerAt = Number.NaN;
    const now = this.#runtime.now();
    const sweeping = now >= this.#sweepDue;
    try {
      if (sweeping) {
        this.#sweepDue = Number.NaN;
        this.#sweep();
      } else this.#heartbeats?.run(now);
    } finally {
      // One failing visit must not stop bind expiry, watchdogs and the backstop credit walk.
      if (!sweeping || this.#beating || this.#hasWork()) this.#arm();
    }
  };
}
