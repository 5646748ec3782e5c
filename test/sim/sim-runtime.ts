/**
 * The simulator's world clock: one ordered event queue for every node's macrotasks and timers and
 * for the network, on a virtual clock, with every choice drawn from one seeded PRNG. A node gets a
 * {@link NodeRuntime} view (its own FIFO of macrotasks, as setImmediate is FIFO within a process);
 * which node runs next, and whether a due timer runs before pending macrotasks, is the seed's.
 */
import type { Runtime, TimerHandle } from '../../src/runtime/runtime.ts';

/** A small, fast, seedable PRNG (mulberry32): the same seed gives the same stream on every run. */
export class Prng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0 || 0x9e3779b9;
  }
  /** A uniform u32. */
  u32(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    return this.u32() / 2 ** 32;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)] as T;
  }
}

interface Timer {
  at: number;
  seq: number;
  fn: (() => void) | null;
  owner: string;
}

/** A binary min-heap of timers by (at, seq). */
class TimerHeap {
  readonly #a: Timer[] = [];
  get size(): number {
    return this.#a.length;
  }
  peek(): Timer | undefined {
    return this.#a[0];
  }
  push(t: Timer): void {
    const a = this.#a;
    a.push(t);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): Timer | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && less(a[l]!, a[m]!)) m = l;
        if (r < a.length && less(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}
const less = (x: Timer, y: Timer): boolean => x.at < y.at || (x.at === y.at && x.seq < y.seq);

/** Let every pending microtask (promise chain) run: a real macrotask comes after all of them. */
const drainMicrotasks = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The world: virtual time, the event queue, the PRNG and a trace of what ran. */
export class SimWorld {
  time = 0;
  readonly rng: Prng;
  readonly #timers = new TimerHeap();
  readonly #nodes: NodeRuntime[] = [];
  readonly #ready: NodeRuntime[] = [];
  #seq = 0;
  /** Events run so far (macrotasks and timers). */
  events = 0;
  macrotasks = 0;
  timersFired = 0;

  constructor(seed: number) {
    this.rng = new Prng(seed);
  }

  /** A runtime for one node: its macrotasks are FIFO; its randomness comes from the world's PRNG. */
  runtime(name: string): NodeRuntime {
    const rt = new NodeRuntime(this, name);
    this.#nodes.push(rt);
    return rt;
  }

  /** @internal */
  addTimer(fn: () => void, ms: number, owner: string): Timer {
    const t: Timer = { at: this.time + Math.max(0, ms), seq: this.#seq++, fn, owner };
    this.#timers.push(t);
    return t;
  }

  /** Schedule a world event (the network, the workload) `ms` from now. */
  after(ms: number, fn: () => void): void {
    this.addTimer(fn, ms, 'world');
  }

  /** Pending timers that can still fire. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Run one event, then let its microtasks settle. False when nothing is left to run before `until`.
   * With macrotasks pending, a timer already due runs first with a seeded chance, as on a real loop.
   */
  async step(until: number): Promise<boolean> {
    // The nodes with macrotasks queued, in node order, in a reused array (a step is the hot loop).
    const ready = this.#ready;
    ready.length = 0;
    for (const n of this.#nodes) if (n.queued > 0) ready.push(n);
    const due = this.#dueTimer();
    if (ready.length > 0 && !(due && this.rng.chance(0.25))) {
      const node = ready.length === 1 ? ready[0]! : this.rng.pick(ready);
      ready.length = 0;
      node.runOne();
      this.macrotasks++;
    } else {
      const t = this.#timers.peek();
      if (t === undefined || t.at > until) {
        // Promise chains still running may queue work (or settle what the caller waits for).
        await drainMicrotasks();
        return this.#nodes.some((n) => n.queued > 0) || this.#dueBy(until);
      }
      this.#timers.pop();
      if (t.fn === null) return true; // cleared
      if (t.at > this.time) this.time = t.at;
      const fn = t.fn;
      t.fn = null;
      fn();
      this.timersFired++;
    }
    this.events++;
    await drainMicrotasks();
    return true;
  }

  /** Jump the clock forward by `ms` at once (the whole host was suspended): timers due meanwhile fire in order. */
  jump(ms: number): void {
    this.time += ms;
  }

  #dueBy(until: number): boolean {
    const t = this.#timers.peek();
    return t !== undefined && t.at <= until;
  }

  #dueTimer(): boolean {
    for (;;) {
      const t = this.#timers.peek();
      if (t === undefined) return false;
      if (t.fn === null) {
        this.#timers.pop();
        continue;
      }
      return t.at <= this.time;
    }
  }
}

/** One node's view of the world: a {@link Runtime} whose every callback is an event of the world. */
export class NodeRuntime implements Runtime {
  readonly #world: SimWorld;
  readonly name: string;
  readonly #fifo: Array<() => void> = [];
  #head = 0;
  envVars: Record<string, string | undefined> = {};

  constructor(world: SimWorld, name: string) {
    this.#world = world;
    this.name = name;
  }
  now(): number {
    return this.#world.time;
  }
  setTimer(fn: () => void, ms: number): TimerHandle {
    return this.#world.addTimer(fn, ms, this.name);
  }
  clearTimer(handle: TimerHandle): void {
    if (typeof handle === 'object' && handle !== null && 'fn' in handle) (handle as Timer).fn = null;
  }
  macrotask(fn: () => void): void {
    this.#fifo.push(fn);
  }
  randomBytes(out: Uint8Array): void {
    for (let i = 0; i < out.length; i += 4) {
      const v = this.#world.rng.u32();
      for (let j = 0; j < 4 && i + j < out.length; j++) out[i + j] = (v >>> (8 * j)) & 0xff;
    }
  }
  env(name: string): string | undefined {
    return this.envVars[name];
  }
  get queued(): number {
    return this.#fifo.length - this.#head;
  }
  /** @internal Run the oldest macrotask. */
  runOne(): void {
    const fn = this.#fifo[this.#head] as () => void;
    this.#fifo[this.#head] = undefined as never;
    this.#head++;
    if (this.#head === this.#fifo.length) {
      this.#fifo.length = 0;
      this.#head = 0;
    }
    fn();
  }
}
