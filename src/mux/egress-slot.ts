/**
 * The producer side of one slot (docs/protocol.md §10.2, §10.7): credit ledger, next frame_seq, the withheld
 * FIFO bounded by the slot byte budget, and the state the producer's `send` waits on.
 */
import type { ReplayOwner } from './replay-log.ts';
import { slotIndex } from '../wire/slot-id.ts';
import { UNBOUNDED_EGRESS, type PeerEgress } from './peer-egress.ts';
import { SenderLedger } from '../credit/sender-ledger.ts';
import type { LanemuxError } from '../errors.ts';

/** Kinds of egress records, as queued before staging. */
export const EgressKind = {
  /** `Item(string)`: written into the batch by hand. */
  ItemString: 0,
  /** `Item(bytes)`: written into the batch by hand. */
  ItemBytes: 1,
  /** A pre-encoded non-terminal Data body (Item of another type, SenderError, Heartbeat). */
  Body: 2,
  /** A pre-encoded terminal body (Finalized, Detached, Dropped, TransportError). */
  Terminal: 3,
} as const;
export type EgressKind = (typeof EgressKind)[keyof typeof EgressKind];

/** Answer of {@link EgressSlot.offer}-style calls. */
export const Offer = {
  /** Accepted; the producer may go on. */
  Ok: 0,
  /** Accepted, but the slot is at its byte cap (or its inlet depth): wait for `waitWritable()`. */
  Wait: 1,
  /** The slot is closed: the record was not taken. */
  Closed: 2,
  /**
   * Not taken: the producer kept sending without waiting while the slot was paused, and the
   * withheld queue reached its hard cap (twice the slot byte budget). Await `send()`.
   */
  Refused: 3,
} as const;
export type Offer = (typeof Offer)[keyof typeof Offer];

/** Outcome of a stream's retirement: whether every record was handed on. */
export type Retirement = 'Sent' | 'Discarded';

/** Callbacks from the batcher to the stream layer's sender. */
export interface EgressSlotOwner {
  /** The slot closed. `error` is null after a terminal was sent; else why (peer close, epoch death …). */
  onSlotClosed(error: LanemuxError | null): void;
  /** A stop (cancel=false) or cancel arrived from the consumer. */
  onLifecycle(cancel: boolean): void;
  /** The stream's output was handed on (Sent) or lost (Discarded). First outcome stands. */
  onRetired(outcome: Retirement): void;
  /**
   * The slot closes with `error` and producers wait on it: return true to take them over (a stream
   * resumed on a new slot wakes them, docs/protocol.md §8.3) instead of their failing. Optional.
   */
  adoptWaiters?(
    error: LanemuxError | null,
    waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>,
  ): boolean;
}

/** The batcher operations a producer reaches through its slot. */
export interface SlotBatcher {
  /** The lane the slot's batches ride. */
  readonly lane: number;
  offer(slot: EgressSlot, kind: number, value: unknown): Offer;
  depart(slot: EgressSlot): void;
  /** Stage a heartbeat only if it can go now (credit, nothing withheld, not parked); else drop it. */
  heartbeat(slot: EgressSlot): void;
}

/** Entries a drained withheld FIFO keeps for reuse; a longer one (a burst) lets its arrays go. */
const KEPT_FIFO_ENTRIES = 64;

/** The pause every producer of a paused slot waits on, with its settlers. */
interface PauseWait {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
  readonly reject: (e: unknown) => void;
}

function pauseWait(): PauseWait {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** The withheld FIFO of a slot that never withheld a record (shared: `enqueue` replaces them first). */
const NO_KINDS: number[] = [];
const NO_VALUES: unknown[] = [];
const NO_BYTES: number[] = [];

/**
 * One owned slot. It is its own credit ledger (`ledger` is the slot itself): a record offered reads
 * and spends the slot's credit, and one object per stream is one cache line fewer per token than two.
 */
export class EgressSlot extends SenderLedger {
  /** The batcher of the slot's (peer, lane). */
  readonly batcher: SlotBatcher;
  id: number;
  // Then the fields a record offered reads: V8 lays fields out as declared, so these share cache lines.
  /** frame_seq of the next record (OpenSlot took 0). */
  nextSeq = 1;
  closed = false;
  closeError: LanemuxError | null = null;
  /** The withheld FIFO's head and tail (its arrays are below). */
  qHead = 0;
  qTail = 0;
  /** At most one singleton outstanding; later records wait behind it. */
  fenced = false;
  /** The OpenSlot has not been written yet (batcher parked at open). */
  opening = true;
  /** The mark of the last batch a Data record of the slot was staged in (the batcher counts slots with data by it, for `onComplete`). */
  stagedBatch = 0;
  /**
   * The resumable stream whose staged records the lane's replay log keeps (replay-log.ts), or null:
   * a stream that is not resumable, or one that keeps its own ring.
   */
  replay: ReplayOwner | null = null;
  readonly index: number;
  readonly anchorId: bigint;
  readonly sessionId: bigint;
  readonly owner: EgressSlotOwner;
  /** Records a producer may hand over while the batcher is parked on admission: C+1, the inlet depth. */
  readonly inletDepth: number;
  /** The negotiated slot byte budget: the withheld queue pauses its producer here. */
  readonly byteBudget: number;
  /** The withheld queue also pauses its producer past this many records (a live feed's 0; else no count bound). */
  withholdDepth = Number.POSITIVE_INFINITY;
  // Withheld FIFO: parallel arrays with a moving head and tail (no object per record), made on the
  // first record withheld (most short streams never withhold one; three arrays per open were
  // measurable). Entries live at [qHead, qTail) (declared above, with the fields a record reads); a
  // drained FIFO keeps its arrays, so a slot that withholds a record every pass (a sender parked on a
  // congested link) allocates nothing again.
  qKind: number[] = NO_KINDS;
  qValue: unknown[] = NO_VALUES;
  qBytes: number[] = NO_BYTES;
  withheldBytes = 0;
  /** The producer left without a terminal; a CloseSlot{PeerGone} is owed after the queue. */
  closeOwed = false;
  /** Inlet paused at the byte cap: the producer's `send` waits. */
  paused = false;
  /** The transfer (or open) whose resolution lifts the fence; 0 when not fenced. */
  fenceId = 0;
  /** asyncOpenAck: acked before its OpenSlot batch was admitted. */
  openAsync = false;
  /** In a starvation episode (counted once). */
  starved = false;
  /** Its head record waits for the peer's window (listed in the batcher's window FIFO). */
  windowBlocked = false;
  /** Listed in the batcher's ready set. */
  ready = false;
  /** The consumer cancelled this session (LifecycleSlot{cancel}): its UnknownSlot close is that cancel. */
  cancelled = false;
  /** A terminal is staged (the slot closes at once; kept for retirement). */
  terminalStaged = false;
  /** A record went by rendezvous (docs/protocol.md §8.1): its arrival is not ordered with the lane's. */
  rendezvous = false;
  /** Settlers of the open's ack while it is outstanding (the batcher's; null otherwise). */
  openResolve: ((slot: EgressSlot) => void) | null = null;
  openReject: ((e: unknown) => void) | null = null;
  /**
   * Called once when the slot has credit again with nothing withheld (a relay waiting for room);
   * null while nobody waits. A close drops it.
   */
  roomWaiter: (() => void) | null = null;
  /**
   * What every producer waiting for the pause to lift holds: one promise per pause, not one per
   * `send` (a paused slot is offered a record per pass until it resumes); made on first wait.
   */
  #wait: PauseWait | null = null;

  /** The slot's credit ledger: the slot itself. */
  get ledger(): SenderLedger {
    return this;
  }

  /** Withheld bytes of every slot toward the same peer (shared). */
  readonly peerEgress: PeerEgress;

  constructor(
    batcher: SlotBatcher,
    id: number,
    anchorId: bigint,
    sessionId: bigint,
    /** The advertised C the slot opens holding (see {@link SenderLedger}). */
    credit: number,
    owner: EgressSlotOwner,
    byteBudget: number,
    peerEgress: PeerEgress = UNBOUNDED_EGRESS(),
  ) {
    super(credit);
    this.peerEgress = peerEgress;
    this.batcher = batcher;
    this.id = id;
    this.index = slotIndex(id);
    this.anchorId = anchorId;
    this.sessionId = sessionId;
    this.owner = owner;
    this.inletDepth = credit + 1;
    this.byteBudget = byteBudget;
  }

  /**
   * Records waiting in the withheld FIFO: a count of its own, as every record offered reads it and
   * the FIFO's arrays are otherwise not touched while nothing is withheld.
   */
  queued = 0;

  enqueue(kind: number, value: unknown, bytes: number): void {
    if (this.qKind === NO_KINDS) {
      this.qKind = [];
      this.qValue = [];
      this.qBytes = [];
    }
    const t = this.qTail;
    if (t === this.qKind.length) {
      this.qKind.push(kind);
      this.qValue.push(value);
      this.qBytes.push(bytes);
    } else {
      this.qKind[t] = kind;
      this.qValue[t] = value;
      this.qBytes[t] = bytes;
    }
    this.qTail = t + 1;
    this.queued++;
    this.withheldBytes += bytes;
    this.peerEgress.withheldBytes += bytes;
  }

  /** Drop the head record of the FIFO. */
  shift(): void {
    const b = this.qBytes[this.qHead]!;
    this.withheldBytes -= b;
    this.peerEgress.withheldBytes -= b;
    this.qValue[this.qHead] = undefined;
    this.qHead++;
    this.queued--;
    if (this.qHead === this.qTail) this.#drained();
    else if (this.qHead > 1024 && this.qHead * 2 > this.qTail) {
      this.qKind.splice(0, this.qHead);
      this.qValue.splice(0, this.qHead);
      this.qBytes.splice(0, this.qHead);
      this.qTail -= this.qHead;
      this.qHead = 0;
    }
  }

  /** The FIFO is empty: start again at the front, keeping small arrays and letting large ones go. */
  #drained(): void {
    this.qHead = 0;
    this.qTail = 0;
    if (this.qKind.length > KEPT_FIFO_ENTRIES) {
      this.qKind.length = 0;
      this.qValue.length = 0;
      this.qBytes.length = 0;
    }
  }

  /** Empty the FIFO; returns how many records were discarded. */
  clearQueue(): number {
    const n = this.queued;
    // Most slots close with an empty FIFO: only one that holds records has values to let go.
    if (n !== 0) {
      for (let i = this.qHead; i < this.qTail; i++) this.qValue[i] = undefined;
      this.#drained();
    }
    this.queued = 0;
    this.peerEgress.withheldBytes -= this.withheldBytes;
    this.withheldBytes = 0;
    return n;
  }

  /** Resolves when the producer may send again; rejects if the slot closes first. */
  waitWritable(): Promise<void> {
    if (this.closed) return Promise.reject(this.closeError);
    if (!this.paused) return Promise.resolve();
    return (this.#wait ??= pauseWait()).promise;
  }

  /** Lift the pause and wake waiting producers. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    const w = this.#wait;
    if (w === null) return;
    this.#wait = null;
    w.resolve();
  }

  /** Call the room waiter (once). */
  wakeRoom(): void {
    const w = this.roomWaiter;
    this.roomWaiter = null;
    w?.();
  }

  /** Fail waiting producers (the slot closed), unless its owner takes them over. */
  failWaiters(error: unknown): void {
    // The room waiter learns of the close from the stream layer (a lost link may resume on a new slot).
    this.roomWaiter = null;
    const w = this.#wait;
    if (w === null) return;
    this.#wait = null;
    if (this.owner.adoptWaiters?.(this.closeError, [w]) === true) return;
    w.reject(error);
  }
}
