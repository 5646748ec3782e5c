// A wait that is re-checked when the test's own callbacks say state changed (an item read, a peer event),
// instead of on a poll timer: it resolves on the very signal, and still gives up after a bounded time
// naming what it waited for and the state it saw then.

interface Waiter {
  readonly predicate: () => boolean;
  readonly resolve: () => void;
}

/** Conditions woken by `notify()`. */
export class Conditions {
  readonly #waiters = new Set<Waiter>();

  /** State changed: resolve every wait whose predicate now holds. */
  notify(): void {
    if (this.#waiters.size === 0) return;
    for (const w of this.#waiters) {
      if (w.predicate()) {
        this.#waiters.delete(w);
        w.resolve();
      }
    }
  }

  /**
   * Resolve once `predicate` holds (checked now and on each `notify()`); reject after `timeoutMs` with
   * `what` and `state()` (what the test saw when it gave up) in the message.
   */
  until(predicate: () => boolean, what: string, timeoutMs: number, state: () => string = () => ''): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        const seen = state();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}${seen === '' ? '' : ` (${seen})`}`));
      }, timeoutMs);
      const waiter: Waiter = {
        predicate,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.#waiters.add(waiter);
    });
  }
}
