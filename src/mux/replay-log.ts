/**
 * The replay log of one (peer, lane) (docs/protocol.md §8.3): the records of resumable streams
 * staged on the lane and not yet known to have arrived, in staging order, one append per record.
 *
 * A resumable stream must be able to send again what a lost link took. What the link can take is
 * what the consumer has not received, so the log keeps a record from its staging until a PING sent
 * on the lane after the batch that carried it is answered (a lane is delivered in order and its
 * batches dispatched synchronously, so the answer means the consumer's ingress has the batch);
 * {@link confirm} then drops it. At epoch death {@link handOut} gives each stream its records back,
 * oldest first, and the stream keeps them in its own replay ring until the resume.
 *
 * One array shared by every stream of the lane, appended in order and dropped from the front: with
 * thousands of streams a token touches the lane's hot tail, not a cold ring of its own stream.
 *
 * Pure: no timers, no I/O; the batcher sends the PINGs (batcher-replay.ts).
 */

import type { PeerId } from '../messenger/types.ts';

/** A stream whose staged records the log keeps (its slot's `replay`). */
export interface ReplayOwner {
  /** The last hand-out that reached this owner (the hand-out's bookkeeping: each owner is finished once). */
  replayRound: number;
  /** One of its records the consumer may lack, oldest first: an egress kind and its payload. */
  recover(kind: number, payload: unknown): void;
  /**
   * Every record it may lack has been given back (the log's, then its slot's withheld ones). `live`:
   * the slot goes on and the stream keeps its records itself from here (a record of it went by
   * rendezvous); else the link is lost.
   */
  recovered(live: boolean): void;
}

/** The node-wide replay byte budget the log charges with the streams' rings. */
export interface ReplayBudgetLike {
  readonly max: number;
  used: number;
  /** Free a finished stream's ring; false when there is none. */
  evict(): boolean;
}

/**
 * Sends a PING on `lane` toward `peer` now: the epoch of the link it went on and its answer
 * (rejected if unanswered); undefined when the peer has no link.
 */
export type LanePing = (peer: PeerId, lane: number) => { epoch: number; answer: Promise<unknown> } | undefined;

/** What a batcher's replay log needs from its node (set once resume is on). */
export interface ReplayHooks {
  readonly budget: ReplayBudgetLike;
  readonly ping: LanePing;
}

/**
 * Bytes a record counts for besides its payload, so that empty items are bounded too: in a lane's log
 * and in a stream's ring alike, since both charge one budget and a record moves from one to the other.
 */
export const REPLAY_RECORD_OVERHEAD = 16;
/** Array slots per entry: owner, payload, `bytes × 4 + kind`. */
const STRIDE = 3;
/** Entries a log starts with. */
const INITIAL_ENTRIES = 256;

let rounds = 0;
/** A fresh hand-out round. */
export function nextReplayRound(): number {
  rounds = (rounds + 1) | 0;
  return rounds;
}

export class ReplayLog {
  readonly #budget: ReplayBudgetLike;
  #entries: unknown[] = [];
  /** Entries the array has room for (0 until the first append, then a power of two). */
  #size = 0;
  #head = 0;
  #length = 0;
  /** Entries ever appended: the position the next one gets. */
  #appended = 0;
  #bytes = 0;
  /** Bumped by every hand-out: a PING sent before it confirms nothing after it. */
  generation = 0;

  constructor(budget: ReplayBudgetLike) {
    this.#budget = budget;
  }

  /** Entries held. */
  get length(): number {
    return this.#length;
  }

  /** Bytes held (as charged to the budget). */
  get bytes(): number {
    return this.#bytes;
  }

  /** The position of the next entry: entries before it are all appended (a batch's mark). */
  get appended(): number {
    return this.#appended;
  }

  /** The position of the oldest entry held. */
  get first(): number {
    return this.#appended - this.#length;
  }

  /**
   * Keep `owner`'s record (`size`: its payload's length, a string's or the bytes'). Over the budget,
   * finished streams' rings go first, then the oldest entries (their streams can no longer resume
   * from before them); a record is always kept, so the log passes its budget by one record at most.
   */
  append(owner: ReplayOwner, kind: number, payload: unknown, size: number): void {
    const bytes = size + REPLAY_RECORD_OVERHEAD;
    const budget = this.#budget;
    if (budget.used + bytes > budget.max) this.#makeRoom(bytes);
    if (this.#length === this.#size) this.#grow();
    const i = ((this.#head + this.#length) & (this.#size - 1)) * STRIDE;
    const e = this.#entries;
    e[i] = owner;
    e[i + 1] = payload;
    e[i + 2] = bytes * 4 + kind;
    this.#length++;
    this.#appended++;
    this.#bytes += bytes;
    budget.used += bytes;
  }

  /** The consumer has every entry before position `mark`: drop them. */
  confirm(mark: number): void {
    const n = mark - this.first;
    if (n > 0) this.#drop(n < this.#length ? n : this.#length);
  }

  /**
   * Give every entry back to its owner, oldest first, then forget them all (epoch death: the
   * link took what was not confirmed). Each owner reached is pushed to `reached` once per `round`.
   */
  handOut(round: number, reached: ReplayOwner[]): void {
    this.generation++;
    const n = this.#length;
    if (n === 0) return;
    // The budget is released first: the rings the records go to charge it again.
    this.#budget.used -= this.#bytes;
    this.#bytes = 0;
    const e = this.#entries;
    const mask = this.#size - 1;
    for (let k = 0; k < n; k++) {
      const i = ((this.#head + k) & mask) * STRIDE;
      const owner = e[i] as ReplayOwner | null;
      if (owner !== null) {
        if (owner.replayRound !== round) {
          owner.replayRound = round;
          reached.push(owner);
        }
        owner.recover((e[i + 2] as number) & 3, e[i + 1]);
      }
      e[i] = e[i + 1] = undefined;
      e[i + 2] = 0;
    }
    this.#head = 0;
    this.#length = 0;
  }

  /**
   * Give `owner`'s entries back to it, oldest first, and keep the others (a stream leaving the log
   * for its own ring). Its entries stay in place, emptied, until confirmed.
   */
  handOutOne(owner: ReplayOwner): void {
    const e = this.#entries;
    const mask = this.#size - 1;
    let released = 0;
    for (let k = 0; k < this.#length; k++) {
      const i = ((this.#head + k) & mask) * STRIDE;
      if (e[i] !== owner) continue;
      const meta = e[i + 2] as number;
      released += Math.floor(meta / 4);
      owner.recover(meta & 3, e[i + 1]);
      e[i] = null;
      e[i + 1] = undefined;
      e[i + 2] = meta & 3;
    }
    this.#bytes -= released;
    this.#budget.used -= released;
  }

  #makeRoom(bytes: number): void {
    const budget = this.#budget;
    while (budget.used + bytes > budget.max && budget.evict()) {}
    if (budget.used + bytes <= budget.max || this.#length === 0) return;
    // Drop the oldest entries, as many as the record needs, in one pass.
    const e = this.#entries;
    const mask = this.#size - 1;
    let n = 0;
    let freed = 0;
    while (n < this.#length && budget.used - freed + bytes > budget.max) {
      freed += Math.floor((e[((this.#head + n) & mask) * STRIDE + 2] as number) / 4);
      n++;
    }
    this.#drop(n);
  }

  /** Drop the oldest `count` entries (1..length), the budget given back once. */
  #drop(count: number): void {
    const e = this.#entries;
    const mask = this.#size - 1;
    let h = this.#head;
    let b = 0;
    for (let k = 0; k < count; k++) {
      const i = h * STRIDE;
      b += Math.floor((e[i + 2] as number) / 4);
      e[i] = e[i + 1] = undefined;
      h = (h + 1) & mask;
    }
    this.#head = h;
    this.#length -= count;
    this.#bytes -= b;
    this.#budget.used -= b;
  }

  #grow(): void {
    const old = this.#entries;
    const size = this.#size;
    const next = size === 0 ? INITIAL_ENTRIES : size * 2;
    // Holes-free from the start (fill), so the array keeps one elements kind.
    const e = new Array<unknown>(next * STRIDE).fill(undefined);
    for (let k = 0; k < this.#length; k++) {
      const from = ((this.#head + k) & (size - 1)) * STRIDE;
      const to = k * STRIDE;
      e[to] = old[from];
      e[to + 1] = old[from + 1];
      e[to + 2] = old[from + 2];
    }
    this.#entries = e;
    this.#size = next;
    this.#head = 0;
  }
}
