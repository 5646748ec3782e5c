/**
 * The few runtime services the runtime-agnostic transport core and messenger need, feature-detected
 * so the same file runs under Node, Deno, Bun and browsers (no `node:*`, no `Buffer`, no `process`).
 *
 * @packageDocumentation
 */

/** Opaque handle of a timer from `setTimeout` / `setInterval` in any runtime. */
export type TimerHandle = ReturnType<typeof setTimeout>;

/**
 * Let a timer not hold the process open (Node and Bun return an object with `unref`, Deno has
 * `Deno.unrefTimer`, browsers return a number and need nothing). Every lanemux timer goes through
 * here, so an idle node never keeps a process alive.
 */
export function unrefTimer(timer: TimerHandle): TimerHandle {
  if (typeof timer === 'object' && timer !== null && 'unref' in timer) {
    (timer as { unref(): unknown }).unref();
  } else if (typeof timer === 'number') {
    const deno = (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno;
    deno?.unrefTimer?.(timer);
  }
  return timer;
}

/** `setTimeout` that does not keep the process alive. */
export function setUnrefTimeout(fn: () => void, ms: number): TimerHandle {
  return unrefTimer(setTimeout(fn, ms));
}

type Task = () => void;
let macrotask: ((task: Task) => void) | undefined;

/**
 * Run `task` on a macrotask, not a microtask: a delivery loop on microtasks would starve timers
 * (timeouts, health checks). `setImmediate` where it exists (Node, Bun); otherwise `setTimeout(0)`,
 * which some runtimes clamp to about 1 ms, acceptable for the in-memory transport that uses this.
 */
export function scheduleMacrotask(task: Task): void {
  if (macrotask === undefined) {
    const si = (globalThis as { setImmediate?: (fn: Task) => unknown }).setImmediate;
    macrotask =
      typeof si === 'function'
        ? (fn) => {
            si(fn);
          }
        : (fn) => {
            setTimeout(fn, 0);
          };
  }
  macrotask(task);
}

/** `n` random bytes from the platform CSPRNG (WebCrypto `getRandomValues`, global in every target runtime). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  globalThis.crypto.getRandomValues(out);
  return out;
}

/** Lower-case hex of some bytes. */
export function toHex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += (b < 16 ? '0' : '') + b.toString(16);
  return s;
}

/** A random 64-bit unsigned integer. */
export function randomU64(): bigint {
  return BigInt('0x' + toHex(randomBytes(8)));
}

/** Monotonic milliseconds (`performance.now()` exists in every target runtime). */
export function nowMs(): number {
  return performance.now();
}

/** A promise plus its settle functions (like `Promise.withResolvers`, which Node 20 lacks). */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
