/**
 * The receiver's per-slot credit account (docs/protocol.md §10.2, §10.7).
 */
import { CreditClass } from './classify.ts';
import { assertCount } from './count.ts';
import { DEFAULT_SLOT_BYTE_BUDGET, MAX_CREDIT } from './constants.ts';
import { CreditError } from './errors.ts';
import { CreditOutcome } from './outcome.ts';

/** Options of {@link ReceiverAccount}. */
export interface ReceiverAccountOptions {
  /**
   * Byte watermark: grants are withheld while the slot buffers at least this many bytes. It is the slot byte budget.
   * Must be ≥ 1 (resolve a wire 0 with `resolveLimits` first). Defaults to 1,048,576.
   */
  readonly watermark?: number | undefined;
}

const TERMINAL_UNSPENT = 0;
const TERMINAL_HELD = 1; // admitted, not yet taken by the consumer
const TERMINAL_TAKEN = 2;

/**
 * Credit account of one ingress slot: `limit` C, data outstanding, ungranted credit, one terminal reserve, and the
 * bytes buffered in the slot.
 *
 * - The slot buffer is C+1 deep: C data records plus the terminal. Control records are admitted without using it.
 * - A data record is admitted only within the window the sender was granted: `limit − dataOutstanding − ungranted`
 *   (the model's `remaining`). Beyond it the answer is `DataExhausted`, an overspend (`ProtocolError`).
 * - Credit returns only when the consumer **takes** records ({@link ReceiverAccount.release}), never on delivery;
 *   it accrues as ungranted until {@link ReceiverAccount.takeGrant}.
 *
 * Hot-path methods answer with strings or numbers and never allocate.
 */
export class ReceiverAccount {
  /** The data window: the C this receiver advertised, moved only by {@link resize}. */
  limit: number;
  /** Grants are withheld while `bufferedBytes ≥ watermark`. */
  readonly watermark: number;
  #dataOutstanding = 0;
  #ungranted = 0;
  #terminal = TERMINAL_UNSPENT;
  #bufferedBytes = 0;

  /**
   * @param limit - the receiver's own C, 0..2^32−1.
   * @param options - the byte watermark.
   */
  constructor(limit: number, options: ReceiverAccountOptions = {}) {
    assertCount(limit, 'limit');
    if (limit > MAX_CREDIT) throw new CreditError('ERR_INVALID_ARGUMENT', `limit ${String(limit)} exceeds 2^32-1`);
    const watermark = options.watermark ?? DEFAULT_SLOT_BYTE_BUDGET;
    assertCount(watermark, 'watermark');
    if (watermark === 0) {
      throw new CreditError('ERR_INVALID_ARGUMENT', 'watermark must be at least 1 byte (a wire 0 means the default)');
    }
    this.limit = limit;
    this.watermark = watermark;
  }

  /** Slot buffer depth: C data records plus the terminal reserve. */
  get depth(): number {
    return this.limit + 1;
  }

  /** Data records admitted and not yet taken by the consumer. */
  get dataOutstanding(): number {
    return this.#dataOutstanding;
  }

  /** Records admitted and not yet taken, the terminal included: never more than {@link depth}. */
  get occupancy(): number {
    return this.#dataOutstanding + (this.#terminal === TERMINAL_HELD ? 1 : 0);
  }

  /** Credit released by consumption and not yet granted. */
  get ungranted(): number {
    return this.#ungranted;
  }

  /** Data records the sender may still send, as this receiver counts them. */
  get remaining(): number {
    return this.limit - this.#dataOutstanding - this.#ungranted;
  }

  /** Whether the terminal reserve has been used. */
  get terminalAdmitted(): boolean {
    return this.#terminal !== TERMINAL_UNSPENT;
  }

  /** Bytes currently buffered in the slot (see {@link addBuffered}). */
  get bufferedBytes(): number {
    return this.#bufferedBytes;
  }

  /**
   * Admits an arriving record. Control → `ok`, nothing used. Data → `ok` within the granted window, else
   * `DataExhausted`. Terminal → `ok` once, then `TerminalAlreadySpent`. A refusal changes nothing.
   */
  admit(cls: CreditClass): CreditOutcome {
    if (cls === CreditClass.Data) {
      if (this.#dataOutstanding + this.#ungranted >= this.limit) return CreditOutcome.DataExhausted;
      this.#dataOutstanding += 1;
      return CreditOutcome.Ok;
    }
    if (cls === CreditClass.Terminal) {
      if (this.#terminal !== TERMINAL_UNSPENT) return CreditOutcome.TerminalAlreadySpent;
      this.#terminal = TERMINAL_HELD;
      return CreditOutcome.Ok;
    }
    return CreditOutcome.Ok;
  }

  /** Counts `bytes` that entered the slot buffer (for the grant watermark). */
  addBuffered(bytes: number): void {
    assertCount(bytes, 'bytes');
    this.#bufferedBytes += bytes;
  }

  /**
   * The consumer took `records` records (and `bytes` bytes) out of the slot buffer. Data records are taken
   * before the terminal, which is always last. Each data record accrues one credit; the terminal accrues none.
   * Releasing more than was admitted is clamped, so credit never exceeds what was admitted; bytes never go below 0.
   *
   * @param records - records the consumer took.
   * @param bytes - their total size in bytes. Defaults to 0.
   * @returns the data credit accrued by this call.
   */
  release(records: number, bytes = 0): number {
    assertCount(records, 'records');
    assertCount(bytes, 'bytes');
    const data = records < this.#dataOutstanding ? records : this.#dataOutstanding;
    this.#dataOutstanding -= data;
    this.#ungranted += data;
    if (records > data && this.#terminal === TERMINAL_HELD) this.#terminal = TERMINAL_TAKEN;
    this.#bufferedBytes = bytes < this.#bufferedBytes ? this.#bufferedBytes - bytes : 0;
    return data;
  }

  /**
   * Moves the window toward `target` records (receive-window auto-tuning): growing adds the difference to the
   * ungranted credit, so the next grant carries it; shrinking keeps ungranted credit instead of granting it back,
   * at most what is ungranted now (credit the sender holds cannot be taken back), so it may take several calls.
   *
   * @param target - the window wanted, ≥ 1 and ≤ 2^32−1.
   * @returns the window now ({@link limit}).
   */
  resize(target: number): number {
    const limit = this.limit;
    if (target > limit) {
      const up = (target > MAX_CREDIT ? MAX_CREDIT : target) - limit;
      this.limit = limit + up;
      this.#ungranted += up;
    } else if (target < limit) {
      const down = limit - target < this.#ungranted ? limit - target : this.#ungranted;
      this.limit = limit - down;
      this.#ungranted -= down;
    }
    return this.limit;
  }

  /**
   * Takes the credit to advertise in a `CreditUpdate`: 0 while the slot buffers at least `watermark` bytes (the
   * credit stays owed), else all ungranted credit, which is then zeroed.
   */
  takeGrant(): number {
    if (this.#bufferedBytes >= this.watermark) return 0;
    const grant = this.#ungranted;
    this.#ungranted = 0;
    return grant;
  }

  /**
   * Takes the grant now due: like {@link takeGrant}, but only once the sender may hold no more than half the window
   * as this receiver counts it ({@link remaining} ≤ ⌊C/2⌋), so a stream read as fast as it arrives returns its
   * credit in grants of about C/2 instead of one per record. It never stalls a sender: `remaining` is the sender's
   * credit plus its records in flight, each arrival lowers it and nothing else does, so a sender that ran dry with
   * nothing in flight sees `remaining` at 0 and the grant is due at once. A sender with more than C/2 records in
   * flight (a window smaller than the link's bandwidth-delay product, which the receive-window auto-tuning grows)
   * may wait for it, as may one whose slot holds its byte budget ({@link takeGrant}'s watermark).
   */
  takeDueGrant(): number {
    return this.grantDue ? this.takeGrant() : 0;
  }

  /** Whether {@link takeDueGrant} would grant now. */
  get grantDue(): boolean {
    return this.#ungranted > 0 && this.grantReachable && this.#bufferedBytes < this.watermark;
  }

  /**
   * Whether a grant can fall due before the next arrival ({@link remaining} ≤ ⌊C/2⌋): a {@link release} moves records
   * from outstanding to ungranted and leaves `remaining` as it is, so while this is false no take makes one due.
   */
  get grantReachable(): boolean {
    return this.limit - this.#dataOutstanding - this.#ungranted <= this.limit >>> 1;
  }
}
