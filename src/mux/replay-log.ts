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
 * A record is kept as its encoded body, in the buffer its batch was written from, not as the item it
 * was made from: an item kept by reference lives through the round trip, and every young collection
 * meanwhile copies it (with a fresh item per token, resume cost a third of the CPU per item; AI SDK
 * chunks, whose encoded body was an allocation of its own, far more). When its batch is written
 * ({@link seal}), a batch that fills its buffer and is mostly this log's records keeps the buffer
 * itself (the batcher writes on in another): no copy. Any other batch's records are copied into the
 * log's chunks, sized to what the log holds (1–64 KiB). So beyond the bytes the budget counts, a
 * log's buffers hold at most three times as much again (a kept buffer is at most twice its batch,
 * which is at most twice what the log's records in it are charged; a chunk's unused tail is
 * smaller than the next record) plus two chunks, and, for a buffer whose records were partly
 * dropped or taken back, the rest of it until its last record goes. Buffers let go are recycled
 * (replay-chunks.ts).
 *
 * The records of the batch being written are read in place: until {@link seal} or {@link handOut},
 * nothing may write that batch's buffer again (a discarded batch's records are handed out before
 * anything is staged).
 *
 * Pure: no timers, no I/O; the batcher sends the PINGs (batcher-replay.ts).
 */

import type { PeerId } from '../messenger/types.ts';
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
/** Array slots per entry: owner, chunk, offset in it, `bytes × 4 + kind`. */
const STRIDE = 4;
/** Smallest and largest chunk the log copies bodies into (a larger body gets one of its size). */
const CHUNK_MIN = 1024;
const CHUNK_MAX = 65_536;
const NO_CHUNK: Uint8Array = new Uint8Array(0);
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
  /** The chunk records are copied into, and how much of it is used. */
  #chunk: Uint8Array = NO_CHUNK;
  #chunkUsed = 0;
  /** Entries from this position on point into the buffer of the batch being written ({@link seal}). */
  #sealed = 0;
  /** What they are charged (body and overhead, at least their records' bytes in the batch). */
  #openBytes = 0;
  /** The buffer the batch being written is in: never recycled from here. */
  #live: Uint8Array = NO_CHUNK;
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
   * Keep `owner`'s record, handed back as `kind`: its body `buf[start, end)`, where `buf` is the
   * buffer of the batch being written (read in place until {@link seal}). Over the budget, finished
   * streams' rings go first, then the oldest entries (their streams can no longer resume from before
   * them); a record is always kept, so the log passes its budget by one record at most.
   */
  append(owner: ReplayOwner, kind: number, buf: Uint8Array, start: number, end: number): void {
    const bytes = end - start + REPLAY_RECORD_OVERHEAD;
    const budget = this.#budget;
    if (budget.used + bytes > budget.max) this.#makeRoom(bytes);
    if (this.#length === this.#size) this.#grow();
    const i = ((this.#head + this.#length) & (this.#size - 1)) * STRIDE;
    const e = this.#entries;
    e[i] = owner;
    e[i + 1] = buf;
    e[i + 2] = start;
    e[i + 3] = bytes * 4 + kind;
    this.#live = buf;
    this.#length++;
    this.#appended++;
    this.#bytes += bytes;
    this.#openBytes += bytes;
    budget.used += bytes;
  }

  /**
   * The batch the entries since the last seal point into was written: `len` bytes of `buf`, the
   * buffer it was written from. True when the log keeps `buf` (the caller writes its next batch in
   * another buffer): a batch that fills at least half of it and is at least half this log's records
   * (as charged: a record's 16 bytes of overhead cover its 13-byte header). Else their bodies are
   * copied into the log's chunks and `buf` is the caller's again.
   */
  seal(buf: Uint8Array, len: number): boolean {
    const from = Math.max(this.#sealed, this.first);
    const open = this.#openBytes;
    // The records may all sit in a buffer the encoder grew out of: then keeping `buf` keeps nothing.
    const inBuf = this.#live === buf;
    this.#sealed = this.#appended;
    this.#openBytes = 0;
    this.#live = NO_CHUNK;
    if (from === this.#appended) return false;
    if (inBuf && 2 * open >= len && 2 * len >= buf.byteLength) {
      // The chunk being filled ends here: a chunk's entries stay in one run (#drop relies on it).
      this.#chunk = NO_CHUNK;
      this.#chunkUsed = 0;
      return true;
    }
    const e = this.#entries;
    const mask = this.#size - 1;
    for (let p = from; p < this.#appended; p++) {
      const i = ((this.#head + p - this.first) & mask) * STRIDE;
      const meta = e[i + 3] as number;
      const n = Math.floor(meta / 4) - REPLAY_RECORD_OVERHEAD;
      const src = e[i + 1] as Uint8Array;
      const at = e[i + 2] as number;
      // An entry a stream took back (handOutOne) has no body; it still names a chunk, in order.
      const chunk = this.#room(n > 0 ? n : 0);
      if (n > 0) {
        const to = this.#chunkUsed;
        chunk.set(src.subarray(at, at + n), to);
        e[i + 2] = to;
        this.#chunkUsed = to + n;
      }
      e[i + 1] = chunk;
    }
    return false;
  }

  /** The chunk being filled, with room for `n` more bytes (a new one when it has none). */
  #room(n: number): Uint8Array {
    if (this.#chunkUsed + n <= this.#chunk.byteLength && this.#chunk !== NO_CHUNK) return this.#chunk;
    // Four times what the log holds, within 1–64 KiB: a busy lane's chunks are large, a quiet one's small.
    let size = CHUNK_MIN;
    while (size < 4 * this.#bytes && size < CHUNK_MAX) size *= 2;
    this.#chunk = takeBuffer(n > size ? n : size);
    this.#chunkUsed = 0;
    return this.#chunk;
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
        owner.recover((e[i + 3] as number) & 3, body(e, i));
      }
      e[i] = e[i + 1] = undefined;
      e[i + 2] = e[i + 3] = 0;
    }
    this.#head = 0;
    this.#length = 0;
    this.#chunk = NO_CHUNK;
    this.#chunkUsed = 0;
    this.#sealed = this.#appended;
    this.#openBytes = 0;
    this.#live = NO_CHUNK;
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
      const meta = e[i + 3] as number;
      released += Math.floor(meta / 4);
      if (this.first + k >= this.#sealed) this.#openBytes -= Math.floor(meta / 4);
      owner.recover(meta & 3, body(e, i));
      // Its chunk stays named: #drop tells where a chunk ends by the entries that point into it.
      e[i] = null;
      e[i + 3] = meta & 3;
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
      freed += Math.floor((e[((this.#head + n) & mask) * STRIDE + 3] as number) / 4);
      n++;
    }
    this.#drop(n);
  }

  /** Drop the oldest `count` entries (1..length), the budget given back once, and the chunks they alone used. */
  #drop(count: number): void {
    const e = this.#entries;
    const mask = this.#size - 1;
    let h = this.#head;
    let b = 0;
    let chunk: unknown;
    let open = 0;
    const first = this.first;
    for (let k = 0; k < count; k++) {
      const i = h * STRIDE;
      const bytes = Math.floor((e[i + 3] as number) / 4);
      b += bytes;
      if (first + k >= this.#sealed) open += bytes;
      // Entries fill chunks in order: a chunk is done with when the entries move past it.
      if (e[i + 1] !== chunk) {
        if (chunk !== undefined) this.#release(chunk as Uint8Array);
        chunk = e[i + 1];
      }
      e[i] = e[i + 1] = undefined;
      h = (h + 1) & mask;
    }
    this.#head = h;
    this.#length -= count;
    this.#bytes -= b;
    this.#openBytes -= open;
    this.#budget.used -= b;
    if (chunk !== undefined && (this.#length === 0 || e[h * STRIDE + 1] !== chunk)) this.#release(chunk as Uint8Array);
  }

  /** No entry points into `chunk` any more. */
  #release(chunk: Uint8Array): void {
    // The batch being written is still in its buffer: the batcher's, not ours to recycle.
    if (chunk === this.#live) return;
    if (chunk !== this.#chunk) giveBuffer(chunk);
    else if (this.#length === 0) this.#chunkUsed = 0; // the chunk being filled, emptied: filled again from its start
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
      e[to + 3] = old[from + 3];
    }
    this.#entries = e;
    this.#size = next;
    this.#head = 0;
  }
}

/** A copy of entry `i`'s body: the stream keeps it past the log, whose chunks it must not pin. */
function body(e: unknown[], i: number): Uint8Array {
  const at = e[i + 2] as number;
  const len = Math.floor((e[i + 3] as number) / 4) - REPLAY_RECORD_OVERHEAD;
  return (e[i + 1] as Uint8Array).slice(at, at + len);
}
