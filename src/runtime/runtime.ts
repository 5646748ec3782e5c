/**
 * The only place that feature-detects runtime globals: a clock, timers, a macrotask scheduler and a
 * CSPRNG. Everything above takes a {@link Runtime}, so tests can inject a manual clock.
 *
 * @packageDocumentation
 */

/** An opaque timer handle. */
export type TimerHandle = unknown;

/** Clock, timers and randomness as the mux uses them. */
export interface Runtime {
  /** Monotonic milliseconds. */
  now(): number;
  /** Run `fn` after `ms`; the timer never keeps the process alive. */
  setTimer(fn: () => void, ms: number): TimerHandle;
  /** Cancel a timer made by `setTimer`. */
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

type Unrefable = { unref?: () => void };

function unref(handle: unknown): void {
  if (typeof handle === 'object' && handle !== null && typeof (handle as Unrefable).unref === 'function')
    (handle as Unrefable).unref!();
}

function makeMacrotask(): (fn: () => void) => void {
  const g = globalThis as { setImmediate?: (fn: () => void) => unknown };
  if (typeof g.setImmediate === 'function') {
    const si = g.setImmediate;
    return (fn) => {
      si(fn);
    };
  }
  if (typeof MessageChannel === 'function') {
    // A FIFO of callbacks behind one port: one message per wake, not one channel per call.
    const queue: Array<() => void> = [];
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      const fn = queue.shift();
      if (fn) fn();
    };
    unref(channel.port1);
    return (fn) => {
      queue.push(fn);
      channel.port2.postMessage(0);
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
  const perf = globalThis.performance;
  return {
    now: perf ? () => perf.now() : () => Date.now(),
    setTimer(fn, ms) {
      const t = setTimeout(fn, ms);
      unref(t);
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
