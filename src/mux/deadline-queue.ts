/**
 * A FIFO of binds waiting for their accept deadline. One constant window per queue means deadlines
 * arrive in order, so the sweep expires from the head and never needs a timer per bind
 * (protocol.md §10.4). Claimed and ended binds are skipped and compacted away.
 */
import type { Bind } from './bind.ts';

export class DeadlineQueue {
  #q: Bind[] = [];
  #head = 0;

  push(bind: Bind): void {
    this.#q.push(bind);
  }

  /** True while some bind may still be waiting. */
  get pending(): boolean {
    return this.#head < this.#q.length;
  }

  /** Call `fn` on every bind still waiting (unclaimed, not ended), oldest first. */
  forEachWaiting(fn: (bind: Bind) => void): void {
    const q = this.#q;
    for (let i = this.#head; i < q.length; i++) {
      const b = q[i]!;
      if (!b.claimed && !b.ended) fn(b);
    }
  }

  /**
   * Pop every bind whose deadline passed and that is still unclaimed, calling `expire` on each.
   * `liveBinds` bounds how much finished work the queue may keep before it compacts.
   */
  expire(now: number, liveBinds: number, expire: (bind: Bind) => void): void {
    const q = this.#q;
    while (this.#head < q.length) {
      const b = q[this.#head]!;
      if (!b.claimed && !b.ended && b.deadline > now) break;
      this.#head++;
      if (!b.claimed && !b.ended) expire(b);
    }
    if (this.#head > 1024 && this.#head * 2 > q.length) {
      q.splice(0, this.#head);
      this.#head = 0;
    }
    // Claimed and ended binds need no deadline: drop them so the queue does not keep a whole
    // window of finished streams alive.
    if (q.length - this.#head > 2 * liveBinds + 1024) {
      this.#q = q.slice(this.#head).filter((b) => !b.claimed && !b.ended);
      this.#head = 0;
    }
  }
}
