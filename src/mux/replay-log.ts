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
 * One ring shared by every stream of the lane, appended in order and dropped from the front: with
 * thousands of streams a token touches the lane's hot tail, not a cold ring of its own stream. An
 * entry is its owner and three numbers in a typed array; where its body went is known per sealed run
 * (one per batch, mostly), so a seal and a confirmation touch no entry's pointers.
 *
 * The batcher keeps a record as its encoded body, never the item by reference: an item made for one
 * send (an engine's fresh token, an object item's body) kept by reference lived through the PING round
 * trip, so every young collection meanwhile copied it (AI SDK chunks cost 1.6× the CPU, fresh 64-byte
 * tokens 1.4×). {@link appendStaged} notes where the body sits in the open batch, and {@link seal}
 * copies the batch's span of them into the log's chunks when it is written: one copy per batch, not
 * one per record (a copy per record cost more than the collections it saved). Chunks are sized to
 * what the log holds (1–64 KiB; a larger body gets one of its own) and let go, oldest first, once
 * their last entry is dropped, all of them when the log is empty. Beyond the bytes the budget counts
 * they hold at most as much again (a chunk's unused tail is smaller than the next body) plus two
 * chunks, and the bodies of a stream that left the log (handOutOne) until their positions are
 * confirmed. Large ones are recycled (replay-chunks.ts).
 *
 * Pure: no timers, no I/O; the batcher sends the PINGs (batcher-replay.ts).
 */

import type { PeerId } from '../messenger/types.ts';
import { RECORD_HEADER_LEN } from '../wire/constants.ts';
import { giveBuffer, takeBuffer } from './replay-chunks.ts';

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
/** Smallest and largest chunk bodies are copied into (a larger body gets a chunk of its size). */
const CHUNK_MIN = 1024;
const CHUNK_MAX = 65_536;
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
  /** Each entry's stream, a ring of `#size` (null: the stream took its record back, handOutOne). */
  #owners: (ReplayOwner | null | undefined)[] = [];
  /**
   * Three numbers per entry, beside its owner: where its body starts in the batch that carried it,
   * the bytes it is charged (0 once taken back) and its kind. In a typed array, so that appending and
   * dropping an entry store no pointer and leave the collector nothing to trace.
   */
  #ints: Int32Array = new Int32Array(0);
  /** Entries the ring has room for (0 until the first append, then a power of two). */
  #size = 0;
  #head = 0;
  #length = 0;
  /** Entries ever appended: the position the next one gets. */
  #appended = 0;
  #bytes = 0;
  /** Chunks holding copied bodies, oldest first, each with the position of its last entry. */
  #chunks: Uint8Array[] = [];
  #chunkLast: number[] = [];
  /** Bytes used in the newest chunk. */
  #chunkUsed = 0;
  /**
   * The sealed runs of entries whose bodies were copied together (a batch's, mostly), oldest first,
   * three slots each: the position after the run's last entry, its chunk, and what turns a body's
   * start in its batch into its offset in that chunk. A seal adds one run and touches no entry; only a hand-out looks bodies up.
   */
  #runs: (number | Uint8Array)[] = [];
  /** Position of the first entry waiting for {@link seal} (−1: none), and the span of the batch theirs take. */
  #pendingFrom = -1;
  #pendingStart = 0;
  #pendingEnd = 0;
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

  /** Bytes of the chunks it holds copied bodies in (beyond what the budget counts; for tests). */
  get chunkBytes(): number {
    let n = 0;
    for (const c of this.#chunks) n += c.byteLength;
    return n;
  }

  /** The position of the next entry: entries before it are all appended (a batch's mark). */
  get appended(): number {
    return this.#appended;
  }

  /** The position of the oldest entry held. */
  get first(): number {
    return this.#appended - this.#length;
  }

  /** The chunk `n` more bytes go into, at `#chunkUsed`: the newest, or a new one when it is full. */
  #chunkFor(n: number): Uint8Array {
    const chunks = this.#chunks;
    const newest = chunks.length > 0 ? chunks[chunks.length - 1]! : null;
    if (newest !== null && this.#chunkUsed + n <= newest.byteLength) return newest;
    // Four times what the log holds, within 1–64 KiB: a busy lane's chunks are large, a quiet one's small.
    let size = CHUNK_MIN;
    while (size < 4 * this.#bytes && size < CHUNK_MAX) size *= 2;
    const chunk = takeBuffer(n > size ? n : size);
    chunks.push(chunk);
    this.#chunkLast.push(0);
    this.#chunkUsed = 0;
    return chunk;
  }

  /**
   * Keep `owner`'s record whose encoded body is `[start, end)` of the open batch, `batch`: the entry
   * waits for {@link seal}, which the batch's writer calls before the batch's buffer is used again.
   * Over the budget, finished streams' rings go first, then the oldest entries (their streams can no
   * longer resume from before them); a record is always kept, so the log passes its budget by one
   * record at most.
   */
  appendStaged(owner: ReplayOwner, kind: number, batch: Uint8Array, start: number, end: number): void {
    const bytes = end - start + REPLAY_RECORD_OVERHEAD;
    const budget = this.#budget;
    if (budget.used + bytes > budget.max) this.#makeRoom(bytes);
    if (this.#length === this.#size) this.#grow();
    // A run holds kept bodies and the record headers between them, nothing else: a record the log does
    // not keep (another stream's, a credit update) between two would be copied and held uncounted.
    if (this.#pendingFrom >= 0 && start !== this.#pendingEnd + RECORD_HEADER_LEN) this.seal(batch);
    if (this.#pendingFrom < 0) {
      this.#pendingFrom = this.#appended;
      this.#pendingStart = start;
    }
    this.#pendingEnd = end;
    const slot = (this.#head + this.#length) & (this.#size - 1);
    this.#owners[slot] = owner;
    const ints = this.#ints;
    const i = slot * 3;
    ints[i] = start;
    ints[i + 1] = bytes;
    ints[i + 2] = kind;
    this.#length++;
    this.#appended++;
    this.#bytes += bytes;
    budget.used += bytes;
  }

  /** Entries of the open batch wait for {@link seal} (their bodies are still in the batch's buffer). */
  get staged(): boolean {
    return this.#pendingFrom >= 0;
  }

  /**
   * The open batch, `batch`, is written (or lost): copy the span of it that the waiting entries'
   * bodies sit in into the log's chunks, as one run.
   */
  seal(batch: Uint8Array): void {
    if (this.#pendingFrom < 0) return;
    this.#pendingFrom = -1;
    // The budget dropped every entry (the waiting ones are the newest): nothing to copy.
    if (this.#length === 0) return;
    const base = this.#pendingStart;
    const n = this.#pendingEnd - base;
    // Into the shared chunks: a batch of 64 records (16 peers) taking a buffer of its own cost the
    // sender 1.18x.
    const chunk = this.#chunkFor(n);
    const at = this.#chunkUsed;
    chunk.set(batch.subarray(base, base + n), at);
    this.#chunkUsed = at + n;
    this.#chunkLast[this.#chunkLast.length - 1] = this.#appended - 1;
    this.#runs.push(this.#appended, chunk, at - base);
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
    if (this.#pendingFrom >= 0) throw new Error('ReplayLog.handOut with entries not sealed');
    this.generation++;
    const n = this.#length;
    if (n === 0) return this.#freeChunks();
    // The budget is released first: the rings the records go to charge it again.
    this.#budget.used -= this.#bytes;
    this.#bytes = 0;
    const owners = this.#owners;
    const mask = this.#size - 1;
    const first = this.first;
    let run = 0;
    for (let k = 0; k < n; k++) {
      const slot = (this.#head + k) & mask;
      const owner = owners[slot];
      if (owner == null) continue;
      while ((this.#runs[run]! as number) <= first + k) run += 3;
      if (owner.replayRound !== round) {
        owner.replayRound = round;
        reached.push(owner);
      }
      owner.recover(this.#ints[slot * 3 + 2]!, this.#body(slot, run));
    }
    this.#clearOwners(this.#head, n);
    this.#head = 0;
    this.#length = 0;
    // Every body was copied out: the chunks are free (so `recover` must not append to this log).
    this.#freeChunks();
  }

  /**
   * Give `owner`'s entries back to it, oldest first, and keep the others (a stream leaving the log
   * for its own ring). Its entries stay in place, emptied, until confirmed.
   */
  handOutOne(owner: ReplayOwner): void {
    if (this.#pendingFrom >= 0) throw new Error('ReplayLog.handOutOne with entries not sealed');
    const owners = this.#owners;
    const ints = this.#ints;
    const mask = this.#size - 1;
    const first = this.first;
    let run = 0;
    let released = 0;
    for (let k = 0; k < this.#length; k++) {
      const slot = (this.#head + k) & mask;
      if (owners[slot] !== owner) continue;
      while ((this.#runs[run]! as number) <= first + k) run += 3;
      owner.recover(ints[slot * 3 + 2]!, this.#body(slot, run));
      released += ints[slot * 3 + 1]!;
      owners[slot] = null;
      ints[slot * 3 + 1] = 0;
    }
    this.#bytes -= released;
    this.#budget.used -= released;
  }

  /** The body of the entry in ring slot `slot`, copied out of the chunk of the run at `run` in `#runs` (the chunk is recycled). */
  #body(slot: number, run: number): Uint8Array {
    const at = this.#ints[slot * 3]! + (this.#runs[run + 2] as number);
    return (this.#runs[run + 1] as Uint8Array).slice(at, at + this.#ints[slot * 3 + 1]! - REPLAY_RECORD_OVERHEAD);
  }

  #makeRoom(bytes: number): void {
    const budget = this.#budget;
    while (budget.used + bytes > budget.max && budget.evict()) {}
    if (budget.used + bytes <= budget.max || this.#length === 0) return;
    // Drop the oldest entries, as many as the record needs, in one pass.
    const ints = this.#ints;
    const mask = this.#size - 1;
    let n = 0;
    let freed = 0;
    while (n < this.#length && budget.used - freed + bytes > budget.max) {
      freed += ints[((this.#head + n) & mask) * 3 + 1]!;
      n++;
    }
    this.#drop(n);
  }

  /** Drop the oldest `count` entries (1..length), the budget given back once. */
  #drop(count: number): void {
    const ints = this.#ints;
    const mask = this.#size - 1;
    const head = this.#head;
    let b = 0;
    for (let k = 0; k < count; k++) b += ints[((head + k) & mask) * 3 + 1]!;
    this.#clearOwners(head, count);
    this.#head = (head + count) & mask;
    this.#length -= count;
    this.#bytes -= b;
    this.#budget.used -= b;
    // Chunks whose last entry is gone, oldest first. An emptied log keeps none; otherwise the newest,
    // if no entry points into it any more, is filled again from its start (unless it is a large
    // body's own chunk).
    if (this.#length === 0) return this.#freeChunks();
    const first = this.first;
    let r = 0;
    while (r < this.#runs.length && (this.#runs[r] as number) <= first) r += 3;
    if (r > 0) this.#runs.splice(0, r);
    const chunks = this.#chunks;
    let k = 0;
    while (k < chunks.length && this.#chunkLast[k]! < first) k++;
    if (k === 0) return;
    if (k === chunks.length && chunks[k - 1]!.byteLength <= CHUNK_MAX) {
      k--;
      this.#chunkUsed = 0;
    }
    for (let j = 0; j < k; j++) giveBuffer(chunks[j]!);
    chunks.splice(0, k);
    this.#chunkLast.splice(0, k);
  }

  /** Let go of the owners of `count` entries from ring slot `from` (wrapping). */
  #clearOwners(from: number, count: number): void {
    const end = from + count;
    if (end <= this.#size) this.#owners.fill(undefined, from, end);
    else {
      this.#owners.fill(undefined, from, this.#size);
      this.#owners.fill(undefined, 0, end - this.#size);
    }
  }

  /** No entry points into any chunk: let them all go. */
  #freeChunks(): void {
    for (const c of this.#chunks) giveBuffer(c);
    this.#chunks = [];
    this.#chunkLast = [];
    this.#chunkUsed = 0;
    this.#runs = [];
  }

  #grow(): void {
    const size = this.#size;
    const next = size === 0 ? INITIAL_ENTRIES : size * 2;
    // Holes-free from the start (fill), so the array keeps one elements kind.
    const owners = new Array<ReplayOwner | null | undefined>(next).fill(undefined);
    const ints = new Int32Array(next * 3);
    // Full when it grows: the ring is [head, size) then [0, head).
    const old = this.#owners;
    const tail = size - this.#head;
    for (let k = 0; k < size; k++) owners[k] = old[(this.#head + k) & (size - 1)];
    ints.set(this.#ints.subarray(this.#head * 3), 0);
    ints.set(this.#ints.subarray(0, this.#head * 3), tail * 3);
    this.#owners = owners;
    this.#ints = ints;
    this.#size = next;
    this.#head = 0;
  }
}
