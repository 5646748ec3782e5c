/**
 * An accept loop that survives a failed accept. Iterating a listener (`for await (const c of
 * listener)`) ends for good at the first error, so one EMFILE (out of file descriptors) or another
 * transient kernel error would stop a server from accepting anyone again while it kept running.
 * Here a failed accept waits and tries again, with a back-off from 5 ms doubling to 1 s, reset by
 * the next success (as Go's `net/http` server does); the loop ends only when its owner stopped it
 * or the runtime says the listener itself is gone.
 */
import { systemRuntime, type Runtime, type TimerHandle } from '../runtime/runtime.ts';

/** Error names (Deno's `Deno.errors.*`) that mean the listener is closed, not that one accept failed. */
const LISTENER_GONE = new Set(['BadResource', 'Interrupted', 'NotConnected']);

/** First and largest pause after a failed accept, in ms. */
export const ACCEPT_BACKOFF_MIN_MS = 5;
export const ACCEPT_BACKOFF_MAX_MS = 1000;

/** What an accept loop needs. */
export interface AcceptLoopOptions<C> {
  /** The next connection (rejects on failure). */
  accept(): Promise<C>;
  /** Hand one accepted connection on. A throw is ignored here: the owner closes that connection itself. */
  onAccepted(conn: C): void;
  /** True once the owner closed or replaced the listener: the loop ends. */
  stopped(): boolean;
  /** Pause between retries (a timer of `runtime` by default; tests inject their own). */
  sleep?(ms: number): Promise<void>;
  /** Clock and timers of the default pause. Defaults to the current runtime's. */
  readonly runtime?: Runtime | undefined;
}

/** A running accept loop. */
export interface AcceptLoop {
  /** Settles when the loop ended (never rejects). */
  readonly done: Promise<void>;
  /** Cut a back-off pause short, so a loop stopped meanwhile ends now rather than after up to 1 s. */
  wake(): void;
}

/** A back-off pause of the default sleep, so `wake` can end it early. */
interface Pause {
  readonly timer: TimerHandle;
  readonly resolve: () => void;
}

/** Accept until stopped. */
export function acceptLoop<C>(o: AcceptLoopOptions<C>): AcceptLoop {
  let pending: Pause | null = null;
  const rt = o.runtime ?? systemRuntime();
  // Kept alive like the listener it serves.
  const timerSleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      pending = { timer: rt.setTimer(resolve, ms, true), resolve };
    });
  const sleep = o.sleep ?? timerSleep;
  const done = (async () => {
    let backoff = 0;
    while (!o.stopped()) {
      let conn: C;
      try {
        conn = await o.accept();
      } catch (e) {
        if (o.stopped() || (e instanceof Error && LISTENER_GONE.has(e.name))) return;
        backoff = backoff === 0 ? ACCEPT_BACKOFF_MIN_MS : Math.min(backoff * 2, ACCEPT_BACKOFF_MAX_MS);
        await sleep(backoff);
        pending = null;
        continue;
      }
      backoff = 0;
      try {
        o.onAccepted(conn);
      } catch {
        // The owner drops that connection itself; the loop goes on for the others.
      }
    }
  })();
  return {
    done,
    wake: () => {
      const p: Pause | null = pending;
      if (p === null) return;
      pending = null;
      rt.clearTimer(p.timer);
      p.resolve();
    },
  };
}
