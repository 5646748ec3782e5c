/**
 * The only place that feature-detects runtime globals: a clock, timers, a macrotask scheduler and a
 * CSPRNG. Everything above (transport, adapters, messenger, mux, streams) takes a {@link Runtime},
 * so a test can drive a whole node with a manual clock.
 *
 * @packageDocumentation
 */
import { toHex } from './hex.ts';

/** An opaque timer handle. */
export type TimerHandle = unknown;

/** Clock, timers and randomness as lanemux uses them. */
export interface Runtime {
  /** Monotonic milliseconds. */
  now(): number;
  /**
   * Run `fn` once after `ms`. The timer does not keep the process alive unless `keepAlive` is true
   * (a pending `connect`, which must settle before the process may exit). Defaults to false.
   * Periodic work re-arms a timer from its callback.
   */
  setTimer(fn: () => void, ms: number, keepAlive?: boolean): TimerHandle;
  /** Cancel a timer made by `setTimer` (a handle that already fired or was cleared is ignored). */
  clearTimer(handle: TimerHandle): void;
  /**
   * Run `fn` on a macrotask: after the current task and its microtasks, so every `await send()`
   * in a loop lands before the batch is written (a microtask would write one record per batch),
   * and without `setTimeout(0)`'s 1 ms clamp.
   */
  macrotask(fn: () => void): void;
  /** Fill `out` with cryptographically strong random bytes. */
  randomBytes(out: Uint8Array): void;
  /** Read an environment variable if the runtime has an environment, else undefined. */
  env(name: string): string | undefined;
}

/** The members of {@link Runtime}, for checking a runtime given from outside. */
const RUNTIME_METHODS = ['now', 'setTimer', 'clearTimer', 'macrotask', 'randomBytes', 'env'] as const;

/** True if `value` has every method of a {@link Runtime} (a duck check: runtimes are implemented outside lanemux). */
export function isRuntime(value: unknown): value is Runtime {
  return (
    typeof value === 'object' &&
    value !== null &&
    RUNTIME_METHODS.every((m) => typeof (value as Record<string, unknown>)[m] === 'function')
  );
}

/** What an invalid runtime option is told it lacks. */
export const RUNTIME_SHAPE = `not a Runtime (needs ${RUNTIME_METHODS.join(', ')})`;

/**
 * Let a timer or port not hold the process open: Node and Bun return an object with `unref`, Deno
 * returns a numeric id for `Deno.unrefTimer`, browsers return a number and need nothing.
 */
function unref(handle: unknown): void {
  if (typeof handle === 'object' && handle !== null) {
    const u = (handle as { unref?: unknown }).unref;
    if (typeof u === 'function') u.call(handle);
  } else if (typeof handle === 'number') {
    const deno = (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno;
    if (typeof deno?.unrefTimer === 'function') deno.unrefTimer(handle);
  }
}

function makeMacrotask(): (fn: () => void) => void {
  const si = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;
  if (typeof si === 'function') {
    return (fn) => {
      si(fn);
    };
  }
  if (typeof MessageChannel === 'function') {
    // A FIFO of callbacks behind one port (made on first use): one message per wake, not one channel per call.
    const queue: Array<() => void> = [];
    let port: MessagePort | undefined;
    return (fn) => {
      if (port === undefined) {
        const channel = new MessageChannel();
        channel.port1.onmessage = () => {
          const next = queue.shift();
          if (next) next();
        };
        unref(channel.port1);
        port = channel.port2;
      }
      queue.push(fn);
      port.postMessage(0);
    };
  }
  return (fn) => {
    setTimeout(fn, 0);
  };
}

function readEnv(name: string): string | undefined {
  const host = globalThis as Record<string, unknown>;
  const proc = Reflect.get(host, 'process') as { env?: Record<string, string | undefined> } | undefined;
  if (proc?.env) return proc.env[name];
  const deno = Reflect.get(host, 'Deno') as { env?: { get(n: string): string | undefined } } | undefined;
  if (deno?.env) {
    try {
      return deno.env.get(name);
    } catch {
      return undefined; // no --allow-env
    }
  }
  return undefined;
}

/** The runtime of the current process (Node, Deno, Bun or a browser). */
export function systemRuntime(): Runtime {
  return {
    // Looked up per call, like the timers: a test's fake clock installed later is honoured.
    now: typeof performance === 'object' ? () => performance.now() : () => Date.now(),
    setTimer(fn, ms, keepAlive) {
      const t = setTimeout(fn, ms);
      if (keepAlive !== true) unref(t);
      return t;
    },
    clearTimer(handle) {
      clearTimeout(handle as ReturnType<typeof setTimeout>);
    },
    macrotask: makeMacrotask(),
    randomBytes(out) {
      globalThis.crypto.getRandomValues(out);
    },
    env: readEnv,
  };
}

/** CSPRNG bytes drawn 4 KiB at a time per runtime: one system call per 512 ids, not one per id. */
const RANDOM_POOL = 4096;
const pools = new WeakMap<Runtime, { view: DataView; offset: number }>();

/** A random u64 from the runtime's CSPRNG (each byte used once). */
export function randomU64(rt: Runtime): bigint {
  let p = pools.get(rt);
  if (p === undefined) {
    p = { view: new DataView(new ArrayBuffer(RANDOM_POOL)), offset: RANDOM_POOL };
    pools.set(rt, p);
  }
  if (p.offset + 8 > RANDOM_POOL) {
    rt.randomBytes(new Uint8Array(p.view.buffer));
    p.offset = 0;
  }
  const v = p.view.getBigUint64(p.offset);
  p.offset += 8;
  return v;
}

/** `bytes` fresh random bytes from the runtime's CSPRNG, as lower-case hex (an instance id, a claim token). */
export function randomHex(rt: Runtime, bytes: number): string {
  const out = new Uint8Array(bytes);
  rt.randomBytes(out);
  return toHex(out);
}

/** A uniform random number in [0, 1) from the runtime's randomness (so a seeded runtime replays jitter too). */
export function randomFraction(rt: Runtime): number {
  return Number(randomU64(rt) >> 11n) / 2 ** 53;
}
