/**
 * The sender side of the credit model: the model {@link Gate} and the async
 * {@link CreditGate} that adds only waiting and waking on top of it.
 */
import { assertCount, checkedAdd } from './count.ts';
import { CreditClosed } from './errors.ts';

/** Answer of a non-waiting acquire. */
export const Acquire = {
  /** The credit was taken. */
  Acquired: 'acquired',
  /** Not enough credit; nothing was taken (waiting consumes nothing). */
  Wait: 'wait',
  /** The gate is closed; read the reason from `closed`. */
  Closed: 'closed',
} as const;
/** Answer of a non-waiting acquire. */
export type Acquire = (typeof Acquire)[keyof typeof Acquire];

/**
 * The model's sender-side window: `available` credit and an optional close reason.
 * Every method is a plain function of the state; nothing waits.
 */
export class Gate {
  #available: number;
  #closed: string | null = null;

  /**
   * `opened(w)`: `available = w`, not closed.
   *
   * @param window - the initial credit, a safe natural number (0 is allowed here; negotiation refuses it).
   */
  constructor(window: number) {
    assertCount(window, 'window');
    this.#available = window;
  }

  /** Credit the sender may still spend. */
  get available(): number {
    return this.#available;
  }

  /** The first close reason, or `null` while open. */
  get closed(): string | null {
    return this.#closed;
  }

  /**
   * Non-waiting acquire of `n` credits. Closed → `closed` even if credit remains; `n ≤ available` → `acquired`
   * (acquiring 0 always succeeds while open); otherwise `wait`, with the state unchanged.
   *
   * @param n - credits to take. Defaults to 1.
   */
  acquire(n = 1): Acquire {
    assertCount(n, 'acquire count');
    if (this.#closed !== null) return Acquire.Closed;
    if (n > this.#available) return Acquire.Wait;
    this.#available -= n;
    return Acquire.Acquired;
  }

  /** Adds `n` credits while open. A grant to a closed gate means nothing and is ignored. */
  grant(n: number): void {
    assertCount(n, 'grant');
    if (this.#closed !== null) return;
    this.#available = checkedAdd(this.#available, n, 'gate credit');
  }

  /** Closes the gate, keeping `available`. Already closed → unchanged: the first reason wins. */
  close(reason: string): void {
    if (this.#closed === null) this.#closed = reason;
  }

  /** An independent copy of this state (for model exploration and snapshots). */
  clone(): Gate {
    const copy = new Gate(this.#available);
    copy.#closed = this.#closed;
    return copy;
  }
}

/** Options of {@link CreditGate.acquire}. */
export interface AcquireOptions {
  /**
   * Aborting rejects this waiter only, with `signal.reason`. It never takes, creates or returns credit, and other
   * waiters are unaffected. Defaults to no signal.
   */
  readonly signal?: AbortSignal | undefined;
}

interface Waiter {
  readonly n: number;
  readonly resolve: () => void;
  readonly reject: (reason: unknown) => void;
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

// One shared settled promise, so an acquire that needs no wait allocates nothing.
const RESOLVED: Promise<void> = /*@__PURE__*/ Promise.resolve();

/**
 * An async credit gate: the model {@link Gate} plus a FIFO of waiters.
 *
 * - `acquire(n)` asks the model in the same synchronous turn: acquired → resolves (a shared resolved promise);
 *   closed → rejects with {@link CreditClosed}; wait → queues the waiter.
 * - `grant` and `close` apply the model, then re-run the queued acquires in FIFO order, still in the same turn, so
 *   no wakeup is lost. After `close` every waiter rejects with the **first** reason.
 * - Waiters are served strictly in order: a later, smaller acquire never overtakes a queued one.
 *
 * @example
 * ```ts
 * const gate = new CreditGate(32);
 * await gate.acquire(1); // one credit per Data record
 * gate.grant(4);         // an inbound CreditUpdate
 * gate.close('END');     // every waiter rejects with CreditClosed('END')
 * ```
 */
export class CreditGate {
  readonly #gate: Gate;
  readonly #waiters: Waiter[] = [];

  /** @param window - the initial credit (`initial_credit`), a safe natural number. */
  constructor(window: number) {
    this.#gate = new Gate(window);
  }

  /** Credit available to the next acquire. */
  get available(): number {
    return this.#gate.available;
  }

  /** The first close reason, or `null` while open. */
  get closed(): string | null {
    return this.#gate.closed;
  }

  /** Number of queued waiters. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /**
   * Non-waiting acquire, as the model's `acquire`, except that it answers `wait` while other waiters are queued
   * (FIFO: it must not overtake them). Acquiring 0 succeeds whenever the gate is open.
   *
   * @param n - credits to take. Defaults to 1.
   */
  tryAcquire(n = 1): Acquire {
    assertCount(n, 'acquire count');
    if (n > 0 && this.#waiters.length > 0 && this.#gate.closed === null) return Acquire.Wait;
    return this.#gate.acquire(n);
  }

  /**
   * Acquires `n` credits, waiting in FIFO order if needed. Resolves once taken; rejects with
   * {@link CreditClosed} (first reason) when the gate is or becomes closed, or with `signal.reason` on abort.
   *
   * @param n - credits to take. Defaults to 1.
   * @param options - `signal` aborts this waiter only.
   */
  acquire(n = 1, options: AcquireOptions = {}): Promise<void> {
    const signal = options.signal;
    assertCount(n, 'acquire count');
    // An aborted caller has given up: take nothing.
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    const answer = this.tryAcquire(n);
    if (answer === Acquire.Acquired) return RESOLVED;
    if (answer === Acquire.Closed) return Promise.reject(new CreditClosed(this.#gate.closed ?? ''));
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { n, resolve, reject, signal, onAbort: undefined };
      if (signal !== undefined) {
        waiter.onAbort = () => this.#abort(waiter);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.push(waiter);
    });
  }

  /** Applies a grant of `n` (ignored once closed), then serves queued waiters in order. */
  grant(n: number): void {
    this.#gate.grant(n);
    this.#serve();
  }

  /**
   * Closes the gate (the first reason wins) and rejects every queued waiter with {@link CreditClosed} carrying
   * that first reason. Later acquires reject too, even with credit left.
   */
  close(reason: string): void {
    this.#gate.close(reason);
    this.#serve();
  }

  #serve(): void {
    const waiters = this.#waiters;
    let error: CreditClosed | undefined;
    while (waiters.length > 0) {
      const head = waiters[0] as Waiter;
      const answer = this.#gate.acquire(head.n);
      if (answer === Acquire.Wait) return;
      waiters.shift();
      detach(head);
      if (answer === Acquire.Acquired) head.resolve();
      else head.reject((error ??= new CreditClosed(this.#gate.closed ?? '')));
    }
  }

  #abort(waiter: Waiter): void {
    const at = this.#waiters.indexOf(waiter);
    if (at < 0) return;
    this.#waiters.splice(at, 1);
    detach(waiter);
    waiter.reject(waiter.signal?.reason);
    // The aborted waiter may have been the head blocking smaller acquires behind it.
    this.#serve();
  }
}

function detach(waiter: Waiter): void {
  if (waiter.onAbort !== undefined) {
    waiter.signal?.removeEventListener('abort', waiter.onAbort);
    waiter.onAbort = undefined;
  }
}
