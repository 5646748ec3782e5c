/**
 * The slots of one (peer, lane) that ended moments ago, on one side (docs/protocol.md §10.9). Credit
 * and closes cross in flight when a stream ends, so records naming a slot that just ended are the
 * ordinary teardown race (stragglers), not routing loss (drops). A fixed ring of (SlotId, session)
 * pairs in typed arrays: written once per ended slot, read only when a record names no live slot.
 * A record for a slot older than the ring ages back into a drop, where something that stale belongs.
 */

/** Slots remembered per (peer, lane) and side. */
export const ENDED_SLOTS = 64;

export class EndedSlots {
  readonly #ids: Uint32Array;
  readonly #sessions: BigUint64Array;
  /** Next write position; entries below `#count` are filled. */
  #next = 0;
  #count = 0;

  /** `size` entries (at least 1; defaults to {@link ENDED_SLOTS}). */
  constructor(size: number = ENDED_SLOTS) {
    const n = Math.max(1, Math.floor(size));
    this.#ids = new Uint32Array(n);
    this.#sessions = new BigUint64Array(n);
  }

  /** Entries the ring holds at most. */
  get size(): number {
    return this.#ids.length;
  }

  /** Entries held now. */
  get count(): number {
    return this.#count;
  }

  /** Remember that `id` (of routing `session`) ended; the oldest entry goes once the ring is full. */
  add(id: number, session: bigint): void {
    const i = this.#next;
    this.#ids[i] = id;
    this.#sessions[i] = session;
    this.#next = i + 1 === this.#ids.length ? 0 : i + 1;
    if (this.#count < this.#ids.length) this.#count++;
  }

  /** True when `id` ended recently (any session): its records are stragglers. */
  has(id: number): boolean {
    const ids = this.#ids;
    for (let i = 0; i < this.#count; i++) if (ids[i] === id >>> 0) return true;
    return false;
  }

  /** True when `id` ended recently for `session` (a record that names both, e.g. LifecycleSlot). */
  hasSession(id: number, session: bigint): boolean {
    const ids = this.#ids;
    const sessions = this.#sessions;
    for (let i = 0; i < this.#count; i++) if (ids[i] === id >>> 0 && sessions[i] === session) return true;
    return false;
  }

  /** Forget everything (a new epoch: its SlotIds name other streams). */
  clear(): void {
    this.#next = 0;
    this.#count = 0;
  }
}
