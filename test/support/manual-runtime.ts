/**
 * A deterministic Runtime for tests: time moves only when the test says so, timers fire in
 * deadline order, and macrotasks run when the test drains them.
 */
import type { Runtime, TimerHandle } from '../../src/runtime/runtime.ts';

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

export class ManualRuntime implements Runtime {
  time = 0;
  #timers: Timer[] = [];
  #macrotasks: Array<() => void> = [];
  #nextId = 1;
  #seed = 1;
  envVars: Record<string, string | undefined> = {};

  now(): number {
    return this.time;
  }
  setTimer(fn: () => void, ms: number): TimerHandle {
    const t = { id: this.#nextId++, at: this.time + Math.max(0, ms), fn };
    this.#timers.push(t);
    return t.id;
  }
  clearTimer(handle: TimerHandle): void {
    this.#timers = this.#timers.filter((t) => t.id !== handle);
  }
  macrotask(fn: () => void): void {
    this.#macrotasks.push(fn);
  }
  randomBytes(out: Uint8Array): void {
    for (let i = 0; i < out.length; i++) {
      this.#seed = (this.#seed * 1103515245 + 12345) >>> 0;
      out[i] = this.#seed >>> 24;
    }
  }
  env(name: string): string | undefined {
    return this.envVars[name];
  }

  /** Pending timers. */
  get timerCount(): number {
    return this.#timers.length;
  }
  /** Pending macrotasks. */
  get macrotaskCount(): number {
    return this.#macrotasks.length;
  }

  /** Run queued macrotasks (and the ones they queue), with microtasks settled between them. */
  async runMacrotasks(limit = 10_000): Promise<void> {
    await settle();
    for (let i = 0; i < limit && this.#macrotasks.length > 0; i++) {
      this.#macrotasks.shift()!();
      await settle();
    }
  }

  /** Advance time by `ms`, firing due timers in order and draining macrotasks after each. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await this.runMacrotasks();
    for (;;) {
      this.#timers.sort((a, b) => a.at - b.at || a.id - b.id);
      const t = this.#timers[0];
      if (!t || t.at > end) break;
      this.#timers.shift();
      this.time = Math.max(this.time, t.at);
      t.fn();
      await this.runMacrotasks();
    }
    this.time = end;
    await this.runMacrotasks();
  }
}

/** Let pending microtasks (promise chains) run. */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}
