/**
 * Heartbeat scheduling of a node's mux producers (docs/protocol.md §10.8 "Heartbeats"): one FIFO
 * per distinct consumer interval, and the mux's one timer wakes for the earliest beat due, so a
 * stream beats at its interval (up to a tenth early, when that lets it share a wake), never with a
 * timer per stream.
 */

/**
 * The shortest heartbeat interval a producer keeps and a consumer's watchdog window lasts, ms: an
 * interval advertised below it is used as this (docs/protocol.md §10.8).
 */
export const HEARTBEAT_FLOOR_MS = 10;

/** Heartbeats due within this fraction of their interval go together, so a wake serves many streams. */
const HEARTBEAT_SLACK = 0.1;

/** One producer's heartbeat schedule. */
interface HeartbeatEntry {
  readonly sender: HeartbeatSender;
  readonly queue: HeartbeatQueue;
  due: number;
  live: boolean;
}

/**
 * The heartbeat senders of one interval, in due order: every entry is re-queued one interval after
 * it beats, so the FIFO stays sorted and the head is the next due (no heap, no timer per stream).
 */
interface HeartbeatQueue {
  readonly interval: number;
  /** Entries due within this much of a wake beat in it (a tenth of the interval). */
  readonly slack: number;
  entries: HeartbeatEntry[];
  head: number;
  /** Removed entries still in `entries[head..]`. */
  dead: number;
}

/** A producer that heartbeats at its consumer's interval; the mux schedules the beats. */
export interface HeartbeatSender {
  /** The interval its consumer advertised (`heartbeat_interval_ms`), ms. */
  readonly interval: number;
  /** Send one heartbeat now (the stream drops it when it must wait). */
  heartbeat(): void;
}

/** Every registered producer, by interval. */
export class HeartbeatSchedule {
  readonly #entries = new Map<HeartbeatSender, HeartbeatEntry>();
  /** Heartbeat FIFOs by interval (one per distinct consumer interval). */
  readonly #queues = new Map<number, HeartbeatQueue>();

  /** Producers registered. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Register a producer at its consumer-advertised interval (at least {@link HEARTBEAT_FLOOR_MS});
   * the first beat is due one interval from `now`. Returns that due time, or NaN when nothing was
   * added (already registered, or no finite interval).
   */
  add(sender: HeartbeatSender, now: number): number {
    if (this.#entries.has(sender)) return Number.NaN;
    const interval = Math.max(HEARTBEAT_FLOOR_MS, sender.interval);
    if (!Number.isFinite(interval)) return Number.NaN;
    let q = this.#queues.get(interval);
    if (q === undefined) {
      q = { interval, slack: interval * HEARTBEAT_SLACK, entries: [], head: 0, dead: 0 };
      this.#queues.set(interval, q);
    }
    // now + interval is never before a queued due (each is at most a past now + interval): the FIFO stays sorted.
    const e: HeartbeatEntry = { sender, queue: q, due: now + interval, live: true };
    q.entries.push(e);
    this.#entries.set(sender, e);
    return e.due;
  }

  /** Stop beating for `sender`. */
  remove(sender: HeartbeatSender): void {
    const e = this.#entries.get(sender);
    if (e === undefined) return;
    this.#entries.delete(sender);
    e.live = false;
    const q = e.queue;
    q.dead++;
    // Streams that end faster than they beat must not pile up a whole interval of dead entries.
    if (q.dead > 1024 && q.dead * 2 > q.entries.length - q.head) {
      q.entries = q.entries.slice(q.head).filter((x) => x.live);
      q.head = 0;
      q.dead = 0;
    }
  }

  /** The earliest heartbeat due (Infinity: none). Drops removed entries at the queue heads. */
  next(): number {
    let at = Number.POSITIVE_INFINITY;
    for (const [interval, q] of this.#queues) {
      const list = q.entries;
      while (q.head < list.length && !list[q.head]!.live) {
        q.head++;
        q.dead--;
      }
      if (q.head === list.length) {
        this.#queues.delete(interval);
        continue;
      }
      const due = list[q.head]!.due;
      if (due < at) at = due;
    }
    return at;
  }

  /** Beat every producer whose heartbeat is due (within its queue's slack). */
  run(now: number): void {
    for (const q of this.#queues.values()) {
      const list = q.entries;
      const limit = now + q.slack;
      // Entries re-queued by this pass sit past `end`: each beats at most once per pass.
      const end = list.length;
      while (q.head < end) {
        const e = list[q.head]!;
        if (e.live && e.due > limit) break;
        q.head++;
        if (!e.live) {
          q.dead--;
          continue;
        }
        e.due = now + q.interval;
        list.push(e);
        e.sender.heartbeat();
      }
      if (q.head > 1024 && q.head * 2 > list.length) {
        list.splice(0, q.head);
        q.head = 0;
      }
    }
  }

  /** Forget every producer. */
  clear(): void {
    this.#entries.clear();
    this.#queues.clear();
  }
}
