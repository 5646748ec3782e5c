/**
 * One live ingress slot (docs/protocol.md §10.2, §10.7): the receiver's credit account (the slot
 * is one, so the ingress path reaches its counters without a second object) and hold
 * budget for one claimed bind, its next expected frame_seq, the hold of records ahead of sequence,
 * a close deferred behind a gap, and the counters the watchdog and the drain signal read. Its
 * transitions are its table's (ingress.ts), which owns the shared epoch, budgets and window.
 */
import { AutoWindow } from '../credit/auto-window.ts';
import { ByteBudget } from '../credit/byte-budget.ts';
import { ReceiverAccount } from '../credit/receiver-account.ts';
import type { PeerId } from '../messenger/types.ts';
import { ItemSlab } from '../wire/item-slab.ts';
import type { Bind, BoundSlot } from './bind.ts';
import type { SlotBuffer } from './slot-buffer.ts';
import type { IngressTable } from './ingress.ts';
import type { IngressWindow } from './ingress-window.ts';

/** A record waiting in the hold (ahead of sequence). */
export interface Held {
  kind: number;
  value: unknown;
  terminal: boolean;
  bytes: number;
  /** Charged to the slot and peer hold budgets (false: held behind an announced rendezvous record). */
  reserved: boolean;
  /** Charged to the peer window. */
  charged: boolean;
}

/** One live ingress slot: its own {@link ReceiverAccount}. */
export class IngressSlot extends ReceiverAccount implements BoundSlot {
  // Fields in the order a record reads them: V8 lays them out as declared, so the ones every record
  // touches share the object's first cache lines (the base class's credit counters come first).
  readonly id: number;
  nextSeq: number;
  /** The bind's C+1 slot buffer, held here so delivery reads one field. */
  readonly buffer: SlotBuffer;
  /** Where this stream's byte items are copied out of their batches. */
  readonly items = new ItemSlab();
  /** The peer window this slot's records are charged to (its link's; outlives the slot in its buffer). */
  readonly window: IngressWindow;
  hold: Map<number, Held> | null = null;
  touched = false;
  closed = false;
  /** Records delivered (watchdog liveness). */
  arrivals = 0;
  /** Drain signal: records and bytes taken since the last reconcile. */
  drained = 0;
  drainedBytes = 0;
  pendingCloseSeq = -1;
  listed = false;
  /** The tuned window (null: static credit C). */
  readonly auto: AutoWindow | null;
  /** `auto.probing`, kept here so an arrival reads the tuning state only while a probe is open. */
  probing = false;
  /** `auto.recordBytes` when the window was last decided: larger records taken decide it again at once. */
  tunedSize = 0;
  /** Records the consumer took since the window was last decided ({@link untunedBytes}: their bytes). */
  untunedRecords = 0;
  /** `auto.epochLeft` when the window was last decided: that many more records taken end its epoch. */
  epochLeft = 0;
  /** The bytes of {@link untunedRecords}. */
  untunedBytes = 0;
  /** {@link arrivals} at the last tuning: a change closes a round-trip probe. */
  tunedArrivals = 0;
  readonly table: IngressTable;
  readonly bind: Bind;
  readonly holdBudget: ByteBudget;
  pendingCloseReason = 0;
  /** Watchdog: arrivals seen at the last window, and dead windows in a row. */
  lastArrivals = 0;
  deadWindows = 0;
  terminalDelivered = false;
  /**
   * Rendezvous records announced for this slot and not yet delivered or refused. Behind one the
   * sender goes on within its credit alone, so its later records are bounded by credit (as in the
   * slot buffer), not by the hold's byte budgets.
   */
  stagedPending = 0;

  constructor(id: number, table: IngressTable, bind: Bind, nextSeq: number) {
    super(bind.limit, { watermark: bind.slotByteBudget });
    this.id = id;
    this.table = table;
    this.bind = bind;
    this.window = table.window;
    this.nextSeq = nextSeq;
    this.buffer = bind.buffer;
    this.holdBudget = new ByteBudget(bind.slotByteBudget);
    const clock = table.clock;
    this.auto =
      clock !== null && bind.limit > 0 && bind.owner.fixedCredit !== true
        ? new AutoWindow(bind.limit, clock.now(), { byteBudget: bind.slotByteBudget })
        : null;
    this.epochLeft = this.auto?.epochLeft ?? 0;
  }

  /** The slot's credit account: the slot itself. */
  get account(): ReceiverAccount {
    return this;
  }

  /** The peer the slot arrived from. */
  get peer(): PeerId {
    return this.table.peer;
  }

  /** The lane it arrived on. */
  get lane(): number {
    return this.table.lane;
  }

  /** The consumer is gone: retire the slot and tell the owner `CloseSlot{UnknownSlot}`. */
  consumerGone(): void {
    this.table.consumerGone(this);
  }

  /** The slot's link is known lost: retire it quietly, suspended if its owner keeps it. */
  linkLost(): void {
    this.table.linkLost(this);
  }

  /** True when the sender holds no data credit and nothing waits behind a gap (watchdog exemption). */
  get senderStarved(): boolean {
    return this.remaining === 0 && (this.hold === null || this.hold.size === 0);
  }
}
