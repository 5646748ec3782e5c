import {
  BATCH_HEADER_LEN,
  type CloseReason,
  LifecycleAction,
  MAX_RECORDS_PER_BATCH,
  MUX_VERSION,
  RECORD_HEADER_LEN,
  RecordType,
} from './constants.ts';
import { WireError } from './errors.ts';
import { utf8Length } from './utf8.ts';
import { itemBytesLength, itemStringLength, itemStringMaxLength, writeItemBytes, writeItemString } from './frame.ts';

/** Options of a {@link BatchEncoder}. */
export interface BatchEncoderOptions {
  /** Largest encoded batch, header included. Defaults to 61,440 (60 KiB, `max_batch_bytes`). */
  readonly maxBytes?: number;
  /** Initial buffer size; the buffer grows by doubling up to `maxBytes`. Defaults to min(maxBytes, 4 KiB). */
  readonly initialBytes?: number;
}

const HARD_MAX_BYTES = 0x7fff_ffff;

/**
 * Writes one batch at a time into a single reusable buffer: `begin`, `append*`, `finish`.
 *
 * Appends allocate nothing (the buffer only grows, by doubling, up to `maxBytes`). `finish`
 * patches `record_count` and returns a view of the buffer, valid until the next `begin`.
 * An append past 65,535 records or past `maxBytes` throws `ERR_BATCH_FULL`; check `fits` first.
 */
export class BatchEncoder {
  #buf: Uint8Array;
  #view: DataView;
  #len = 0;
  #count = 0;
  #open = false;
  readonly #maxBytes: number;

  constructor(options: BatchEncoderOptions = {}) {
    const maxBytes = options.maxBytes ?? 61_440;
    if (!Number.isInteger(maxBytes) || maxBytes < BATCH_HEADER_LEN || maxBytes > HARD_MAX_BYTES) {
      throw new WireError(
        'ERR_INVALID_ARGUMENT',
        `maxBytes must be an integer in ${BATCH_HEADER_LEN}..${HARD_MAX_BYTES}, got ${maxBytes}`,
      );
    }
    this.#maxBytes = maxBytes;
    const initial = Math.max(BATCH_HEADER_LEN, Math.min(maxBytes, options.initialBytes ?? 4096));
    this.#buf = new Uint8Array(initial);
    this.#view = new DataView(this.#buf.buffer);
  }

  /** The byte cap of one batch. */
  get maxBytes(): number {
    return this.#maxBytes;
  }
  /** The buffer the open batch is written into, `[0, byteLength)` (valid until the next append or `begin`). */
  get buffer(): Uint8Array {
    return this.#buf;
  }
  /** Encoded length so far: 16 + Σ(13 + body length). */
  get byteLength(): number {
    return this.#len;
  }
  /** Records appended since `begin`. */
  get recordCount(): number {
    return this.#count;
  }
  /** True between `begin` and `finish`. */
  get isOpen(): boolean {
    return this.#open;
  }
  /** Bytes still free under the cap. */
  get remainingBytes(): number {
    return this.#maxBytes - this.#len;
  }

  /** Start a new batch; discards anything from the previous one. */
  begin(epoch: bigint, batchSeq: number, flags = 0): void {
    if (!(flags >= 0 && flags <= 0xff && Number.isInteger(flags)))
      throw new WireError('ERR_INVALID_ARGUMENT', `flags must be a u8, got ${flags}`);
    if (!(batchSeq >= 0 && batchSeq <= 0xffff_ffff && Number.isInteger(batchSeq))) {
      throw new WireError('ERR_INVALID_ARGUMENT', `batch_seq must be a u32, got ${batchSeq}`);
    }
    if (epoch < 0n || epoch > 0xffff_ffff_ffff_ffffn)
      throw new WireError('ERR_INVALID_ARGUMENT', `epoch must be a u64, got ${epoch}`);
    const v = this.#view;
    v.setUint8(0, MUX_VERSION);
    v.setUint8(1, flags);
    v.setUint16(2, 0);
    v.setBigUint64(4, epoch);
    v.setUint32(12, batchSeq);
    this.#len = BATCH_HEADER_LEN;
    this.#count = 0;
    this.#open = true;
  }

  /** Overwrite the batch_seq of the open batch (used when a reserved seq is given back). */
  setBatchSeq(batchSeq: number): void {
    this.#view.setUint32(12, batchSeq >>> 0);
  }

  /** True if one more record with a body of `bodyLength` bytes fits (record count and byte cap). */
  fits(bodyLength: number): boolean {
    return this.#count < MAX_RECORDS_PER_BATCH && this.#len + RECORD_HEADER_LEN + bodyLength <= this.#maxBytes;
  }

  /** Append a Data record with an already-encoded StreamFrame body (copied in). */
  appendData(slot: number, frameSeq: number, body: Uint8Array): void {
    const at = this.#record(RecordType.Data, slot, frameSeq, body.byteLength);
    this.#buf.set(body, at);
  }

  /** Append a Data record carrying `Item(bytes)`, msgpack written straight into the batch. */
  appendItemBytes(slot: number, frameSeq: number, bytes: Uint8Array): void {
    const at = this.#record(RecordType.Data, slot, frameSeq, itemBytesLength(bytes.byteLength));
    writeItemBytes(this.#buf, at, bytes);
  }

  /** Append a Data record carrying `Item(str)`, msgpack and UTF-8 written straight into the batch. */
  appendItemString(slot: number, frameSeq: number, str: string): void {
    const max = itemStringMaxLength(str);
    // The upper bound avoids scanning the string; near the cap, measure it exactly.
    const exact = RECORD_HEADER_LEN + max <= this.remainingBytes ? -1 : itemStringLength(str);
    this.#checkRoom(exact < 0 ? max : exact);
    this.#ensure(this.#len + RECORD_HEADER_LEN + (exact < 0 ? max : exact));
    const at = this.#len + RECORD_HEADER_LEN;
    const n = writeItemString(this.#buf, at, str, exact < 0 ? -1 : utf8Length(str));
    this.#header(RecordType.Data, slot, frameSeq, n);
  }

  /** Append `OpenSlot{anchor_id, session_id}` (16-byte body). */
  appendOpenSlot(slot: number, frameSeq: number, anchorId: bigint, sessionId: bigint): void {
    const at = this.#record(RecordType.OpenSlot, slot, frameSeq, 16);
    this.#view.setBigUint64(at, BigInt.asUintN(64, anchorId));
    this.#view.setBigUint64(at + 8, BigInt.asUintN(64, sessionId));
  }

  /** Append `CloseSlot{reason}` (1-byte body). */
  appendCloseSlot(slot: number, frameSeq: number, reason: CloseReason): void {
    if (!(reason >= 0 && reason <= 3))
      throw new WireError('ERR_INVALID_ARGUMENT', `close reason must be 0..3, got ${reason}`);
    const at = this.#record(RecordType.CloseSlot, slot, frameSeq, 1);
    this.#buf[at] = reason;
  }

  /** Append `CreditUpdate{delta}` (4-byte body). */
  appendCreditUpdate(slot: number, frameSeq: number, delta: number): void {
    const at = this.#record(RecordType.CreditUpdate, slot, frameSeq, 4);
    this.#view.setUint32(at, delta >>> 0);
  }

  /**
   * Add `delta` to the `CreditUpdate` appended to the open batch at `recordOffset` (the encoder's
   * `byteLength` just before that append), so one record carries a slot's grants (docs/protocol.md §10.7).
   * Returns false, changing nothing, when the sum would pass 2^32 − 1.
   */
  addToCreditUpdate(recordOffset: number, delta: number): boolean {
    const at = recordOffset + RECORD_HEADER_LEN;
    if (
      !this.#open ||
      recordOffset < BATCH_HEADER_LEN ||
      at + 4 > this.#len ||
      this.#buf[recordOffset] !== RecordType.CreditUpdate
    ) {
      throw new WireError('ERR_INVALID_ARGUMENT', `no CreditUpdate at offset ${recordOffset} of the open batch`);
    }
    const sum = this.#view.getUint32(at) + delta;
    if (sum > 0xffff_ffff) return false;
    this.#view.setUint32(at, sum);
    return true;
  }

  /** Append a `SlotHeartbeat` (empty body). */
  appendSlotHeartbeat(slot: number, frameSeq: number): void {
    this.#record(RecordType.SlotHeartbeat, slot, frameSeq, 0);
  }

  /** Append `LifecycleSlot{session_id, action}` (9-byte body). */
  appendLifecycleSlot(slot: number, frameSeq: number, sessionId: bigint, action: LifecycleAction): void {
    if (action !== LifecycleAction.Stop && action !== LifecycleAction.Cancel) {
      throw new WireError('ERR_INVALID_ARGUMENT', `lifecycle action must be 0 or 1, got ${action}`);
    }
    const at = this.#record(RecordType.LifecycleSlot, slot, frameSeq, 9);
    this.#view.setBigUint64(at, BigInt.asUintN(64, sessionId));
    this.#buf[at + 8] = action;
  }

  /**
   * Patch `record_count` and return the encoded batch: a view of the internal buffer, valid until
   * the next `begin` (the caller must not hand it on past that without copying).
   */
  finish(): Uint8Array {
    if (!this.#open) throw new WireError('ERR_INVALID_ARGUMENT', 'finish() without begin()');
    this.#view.setUint16(2, this.#count);
    this.#open = false;
    return this.#buf.subarray(0, this.#len);
  }

  /** Drop the open batch without finishing it. */
  discard(): void {
    this.#open = false;
    this.#len = 0;
    this.#count = 0;
  }

  #checkRoom(bodyLength: number): void {
    if (!this.#open) throw new WireError('ERR_INVALID_ARGUMENT', 'append without begin()');
    if (this.#count >= MAX_RECORDS_PER_BATCH) {
      throw new WireError('ERR_BATCH_FULL', `BatchFull: a batch holds at most ${MAX_RECORDS_PER_BATCH} records`);
    }
    if (this.#len + RECORD_HEADER_LEN + bodyLength > this.#maxBytes) {
      throw new WireError(
        'ERR_BATCH_FULL',
        `BatchFull: a ${bodyLength}-byte record does not fit (${this.#len} of ${this.#maxBytes} bytes used)`,
      );
    }
  }

  #record(type: number, slot: number, frameSeq: number, bodyLength: number): number {
    const at = this.#len + RECORD_HEADER_LEN;
    // One comparison for the usual record: the buffer never outgrows maxBytes, so a record that
    // fits the buffer of an open batch with room for one more record fits the cap too.
    if (at + bodyLength > this.#buf.byteLength || this.#count >= MAX_RECORDS_PER_BATCH || !this.#open) {
      this.#checkRoom(bodyLength);
      this.#ensure(at + bodyLength);
    }
    this.#header(type, slot, frameSeq, bodyLength);
    return at;
  }

  #header(type: number, slot: number, frameSeq: number, bodyLength: number): void {
    const v = this.#view;
    const p = this.#len;
    v.setUint8(p, type);
    v.setUint32(p + 1, slot >>> 0);
    v.setUint32(p + 5, frameSeq >>> 0);
    v.setUint32(p + 9, bodyLength);
    this.#len = p + RECORD_HEADER_LEN + bodyLength;
    this.#count++;
  }

  #ensure(size: number): void {
    if (size <= this.#buf.byteLength) return;
    // Double, but never past the cap: every append checks its room against maxBytes first.
    let cap = this.#buf.byteLength * 2;
    while (cap < size) cap *= 2;
    if (cap > this.#maxBytes) cap = Math.max(size, this.#maxBytes);
    const next = new Uint8Array(cap);
    next.set(this.#buf.subarray(0, this.#len));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }
}
