/**
 * A batcher's control inbox: coalesced state, not a queue. Ingress and the
 * consumer post grants, closes, rejects and lifecycle signals; the batcher drains it once per wake.
 * Its size is bounded by what the batcher allocated (owned keys) and what ingress admitted
 * (replies); only the reject lane has a cap (8,192).
 */
import { MAX_CREDIT } from '../credit/constants.ts';
import { slotIndex, slotGeneration } from '../wire/slot-id.ts';

/** The only capped control map: rejections of OpenSlots ingress never admitted. */
export const MAX_PENDING_REJECTS = 8_192;

/** Coalesced control for one owned slot. */
export interface OwnedEntry {
  /** The slot's full SlotId (its key: a drain is walked by value, as entries() makes an array per entry). */
  readonly slot: number;
  credit: number;
  /** First close reason wins (-1: none). A close dominates credit. */
  close: number;
  /** Singleton resolution: 0 none, 1 success, 2 failure (failure dominates). */
  resolution: number;
  resolutionError: string;
  /** The transfer a success resolves (0: any); only that singleton's resolution lifts its fence. */
  resolutionId: number;
}

/** Coalesced reply for one peer slot (a slot this side's ingress holds). */
export interface ReplyEntry {
  /** The peer's full SlotId (its key). */
  readonly slot: number;
  credit: number;
  close: number;
}

const sat = (a: number, b: number): number => (a + b > MAX_CREDIT ? MAX_CREDIT : a + b);

/** Visitor of a drain, in the order the batcher applies it. */
export interface InboxDrain {
  kicked: boolean;
  retire: boolean;
  /** Replies keyed by the peer's full SlotId. */
  replies: Map<number, ReplyEntry>;
  /** Rejects keyed by the peer's full SlotId → close reason. */
  rejects: Map<number, number>;
  /** Lifecycle replies: `${slot}:${session}` → [slot, session, cancel]. */
  lifecycleReplies: Map<string, { slot: number; session: bigint; cancel: boolean }>;
  /** Owned-slot control keyed by full SlotId. */
  owned: Map<number, OwnedEntry>;
  /** Lifecycle signals for owned slots, one per slot (its live session only). */
  ownedLifecycle: Map<number, { slot: number; session: bigint; cancel: boolean }>;
}

// Shared empty maps for a drain with nothing in it; never written to.
const EMPTY = {
  replies: new Map<number, ReplyEntry>(),
  rejects: new Map<number, number>(),
  lifecycleReplies: new Map<string, { slot: number; session: bigint; cancel: boolean }>(),
  owned: new Map<number, OwnedEntry>(),
  ownedLifecycle: new Map<number, { slot: number; session: bigint; cancel: boolean }>(),
};

/** The coalesced control inbox of one (peer, lane) batcher. */
export class ControlInbox {
  #replies = new Map<number, ReplyEntry>();
  #rejects = new Map<number, number>();
  #lifecycleReplies = new Map<string, { slot: number; session: bigint; cancel: boolean }>();
  #owned = new Map<number, OwnedEntry>();
  #ownedLifecycle = new Map<number, { slot: number; session: bigint; cancel: boolean }>();
  /** Routing session per allocated index, when the batcher published one. */
  #sessions: Array<bigint | undefined> = [];
  /** Live generation per allocated index (-1: never allocated). */
  #live: Int16Array = new Int16Array(0);
  #kicked = false;
  #retire = false;
  #pending = false;
  #closed = false;
  #waiters: Array<() => void> = [];
  /** Owned keys refused (index never allocated, or reject lane full). */
  refused = 0;
  /** Called on the false → true transition of "something is pending": one notify permit. */
  onNotify: (() => void) | null = null;

  /** True once closed: every post is refused. */
  get closed(): boolean {
    return this.#closed;
  }
  /** True when something was posted since the last drain. */
  get pending(): boolean {
    return this.#pending;
  }
  /** Entries waiting (replies + rejects + lifecycle + owned). */
  get size(): number {
    return (
      this.#replies.size +
      this.#rejects.size +
      this.#lifecycleReplies.size +
      this.#owned.size +
      this.#ownedLifecycle.size
    );
  }
  /** Rejects waiting. */
  get pendingRejects(): number {
    return this.#rejects.size;
  }

  /**
   * The batcher allocated `index` at `generation` (for the routing `session`, if given): keys for
   * it are now accepted, and lifecycle signals only for that session.
   */
  publish(index: number, generation: number, session?: bigint): void {
    this.#sessions[index] = session;
    if (index >= this.#live.length) {
      const next = new Int16Array(Math.max(64, this.#live.length * 2, index + 1)).fill(-1);
      next.set(this.#live);
      this.#live = next;
    }
    this.#live[index] = generation;
  }

  /** Accept-check of an owned key: 'ok', 'stale' (drop silently) or 'refused' (never allocated). */
  #ownedKey(slot: number): 'ok' | 'stale' | 'refused' {
    const live = this.#live[slotIndex(slot)];
    if (live === undefined || live < 0) return 'refused';
    return live === slotGeneration(slot) ? 'ok' : 'stale';
  }

  #owned_(slot: number): OwnedEntry {
    let e = this.#owned.get(slot);
    if (!e) {
      e = { slot, credit: 0, close: -1, resolution: 0, resolutionError: '', resolutionId: 0 };
      this.#owned.set(slot, e);
    }
    return e;
  }

  #notify(): void {
    if (this.#pending) return;
    this.#pending = true;
    const w = this.#waiters;
    if (w.length > 0) {
      this.#waiters = [];
      for (const f of w) f();
    }
    this.onNotify?.();
  }

  /** The entry to post owned control for `slot` into, or why not: false (refused) or true (stale: dropped). */
  #ownedEntry(slot: number): OwnedEntry | boolean {
    if (this.#closed) return false;
    const k = this.#ownedKey(slot);
    if (k === 'refused') {
      this.refused++;
      return false;
    }
    if (k === 'stale') return true; // ordinary close-then-reopen race: never credits the live entry
    return this.#owned_(slot);
  }

  /** A CreditUpdate for an owned slot. Returns false if refused. */
  postCredit(slot: number, delta: number): boolean {
    // No callback per post: a grant is the commonest control record.
    const e = this.#ownedEntry(slot);
    if (typeof e === 'boolean') return e;
    e.credit = sat(e.credit, delta);
    this.#notify();
    return true;
  }

  /** A peer close (UnknownSlot / ProtocolError) for an owned slot: first reason wins. */
  postClose(slot: number, reason: number): boolean {
    const e = this.#ownedEntry(slot);
    if (typeof e === 'boolean') return e;
    if (e.close < 0) e.close = reason;
    this.#notify();
    return true;
  }

  /** A singleton admission result for an owned slot. Never refused (not even at the reject cap). */
  postResolution(slot: number, ok: boolean, error = '', transferId = 0): boolean {
    if (this.#closed) return false;
    const k = this.#ownedKey(slot);
    if (k !== 'ok') return k === 'stale';
    const e = this.#owned_(slot);
    if (!ok) {
      if (e.resolution !== 2) e.resolutionError = error;
      e.resolution = 2;
    } else if (e.resolution !== 2) {
      e.resolution = 1;
      e.resolutionId = transferId;
    }
    this.#notify();
    return true;
  }

  /** A peer's stop (cancel=false) or cancel for an owned slot's session. Cancel beats stop. */
  postLifecycle(slot: number, session: bigint, cancel: boolean): boolean {
    if (this.#closed) return false;
    const k = this.#ownedKey(slot);
    if (k === 'refused') {
      this.refused++;
      return false;
    }
    if (k === 'stale') return true;
    // A signal for another session (a reused index) is stale: dropped, so a peer cannot grow the
    // map with made-up sessions.
    const live = this.#sessions[slotIndex(slot)];
    if (live !== undefined && live !== session) return true;
    const e = this.#ownedLifecycle.get(slot);
    if (e && e.session === session) e.cancel ||= cancel;
    else this.#ownedLifecycle.set(slot, { slot, session, cancel });
    this.#notify();
    return true;
  }

  /** A credit reply for a slot this side's ingress holds. Never refused while open. */
  postReplyCredit(peerSlot: number, delta: number): boolean {
    if (this.#closed) return false;
    const e = this.#replies.get(peerSlot);
    if (e) e.credit = sat(e.credit, delta);
    else this.#replies.set(peerSlot, { slot: peerSlot, credit: delta > MAX_CREDIT ? MAX_CREDIT : delta, close: -1 });
    this.#notify();
    return true;
  }

  /** A close reply (UnknownSlot / ProtocolError) for a slot this side's ingress held. Never refused while open. */
  postReplyClose(peerSlot: number, reason: number): boolean {
    if (this.#closed) return false;
    const e = this.#replies.get(peerSlot);
    if (e) {
      if (e.close < 0) e.close = reason;
    } else this.#replies.set(peerSlot, { slot: peerSlot, credit: 0, close: reason });
    this.#notify();
    return true;
  }

  /** A lifecycle reply (consumer stop/cancel) for a peer slot. Cancel beats stop; sessions stay separate. */
  postReplyLifecycle(peerSlot: number, session: bigint, cancel: boolean): boolean {
    if (this.#closed) return false;
    const key = `${peerSlot}:${session}`;
    const e = this.#lifecycleReplies.get(key);
    if (e) e.cancel ||= cancel;
    else this.#lifecycleReplies.set(key, { slot: peerSlot, session, cancel });
    this.#notify();
    return true;
  }

  /** Reject an OpenSlot ingress never admitted. Capped at 8,192; a repeated key is not counted. */
  postReject(peerSlot: number, reason: number): boolean {
    if (this.#closed) return false;
    if (this.#rejects.has(peerSlot)) return true;
    if (this.#rejects.size >= MAX_PENDING_REJECTS) {
      this.refused++;
      return false;
    }
    this.#rejects.set(peerSlot, reason);
    this.#notify();
    return true;
  }

  /** `flushBatch()`: a kick. A thousand kicks are one bit. */
  kick(): void {
    if (this.#closed) return;
    this.#kicked = true;
    this.#notify();
  }

  /** Ask the batcher to retire. */
  postRetire(): void {
    if (this.#closed) return;
    this.#retire = true;
    this.#notify();
  }

  /** Resolves at once if something is pending, else on the next post (no lost wakeup). */
  wait(): Promise<void> {
    if (this.#pending || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Take everything pending, leaving the inbox empty. */
  drain(): InboxDrain {
    const empty = this.size === 0;
    const d: InboxDrain = {
      kicked: this.#kicked,
      retire: this.#retire,
      replies: empty ? EMPTY.replies : this.#replies,
      rejects: empty ? EMPTY.rejects : this.#rejects,
      lifecycleReplies: empty ? EMPTY.lifecycleReplies : this.#lifecycleReplies,
      owned: empty ? EMPTY.owned : this.#owned,
      ownedLifecycle: empty ? EMPTY.ownedLifecycle : this.#ownedLifecycle,
    };
    if (!empty) {
      this.#replies = new Map();
      this.#rejects = new Map();
      this.#lifecycleReplies = new Map();
      this.#owned = new Map();
      this.#ownedLifecycle = new Map();
    }
    this.#kicked = false;
    this.#retire = false;
    this.#pending = false;
    return d;
  }

  /** Close: hand back everything that landed before, refuse everything after. */
  close(): InboxDrain {
    const d = this.drain();
    this.#closed = true;
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
    return d;
  }
}
