import { BATCH_HEADER_LEN, FIXED_BODY_LEN, MUX_VERSION, RECORD_HEADER_LEN, RecordType } from './constants.ts';
import { DecodeError } from './errors.ts';
import type { BatchHeader } from './header.ts';

/**
 * A fused, zero-copy cursor over one `_stream_batch` payload (docs/protocol.md §10.4 "Decoding").
 *
 * `reset(payload)` reads the header; each `next()` advances to the next record and exposes its
 * fields on the reader itself (no object per record). Bodies are `(bodyOffset, bodyLength)` ranges
 * into the payload; `body()` returns a view, never a copy. The reader never throws: the first
 * malformed case sets `error` and every later `next()` returns false. Nothing is allocated from a
 * declared count or length.
 *
 * @example
 * ```ts
 * const r = new BatchReader();
 * if (r.reset(payload)) while (r.next()) handle(r.type, r.slot, r.frameSeq, r.body());
 * if (r.error) log(r.error.kind);
 * ```
 */
export class BatchReader {
  /** The payload being read. */
  payload: Uint8Array = new Uint8Array(0);
  /** First error met, if any; the reader yields nothing after it. */
  error: DecodeError | null = null;
  /** True once the header parsed (even with an unsupported version, for metering). */
  hasHeader = false;

  // Header
  version = 0;
  flags = 0;
  recordCount = 0;
  /** High and low 32 bits of `peer_epoch` (compare without bigint). */
  epochHi = 0;
  epochLo = 0;
  batchSeq = 0;

  // Current record
  /** Byte offset of the current record's header. */
  recordOffset = 0;
  type = 0;
  slot = 0;
  frameSeq = 0;
  bodyOffset = 0;
  bodyLength = 0;
  /** Records yielded so far. */
  index = 0;

  #view: DataView = new DataView(new ArrayBuffer(0));
  #pos = 0;
  #done = true;

  /**
   * Start reading `payload`. Returns true if records can be read (header present and version
   * supported). On `UnsupportedVersion` the header fields are still set and `hasHeader` is true.
   */
  reset(payload: Uint8Array): boolean {
    // Views of a plain Uint8Array are far cheaper than views of a Node Buffer (a subclass).
    this.payload =
      payload.constructor === Uint8Array
        ? payload
        : new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
    this.error = null;
    this.index = 0;
    this.#pos = BATCH_HEADER_LEN;
    this.#done = true;
    this.hasHeader = false;
    if (payload.byteLength < BATCH_HEADER_LEN) {
      this.error = new DecodeError(
        'TruncatedBatchHeader',
        0,
        `payload is ${payload.byteLength} bytes, header needs ${BATCH_HEADER_LEN}`,
      );
      return false;
    }
    const v = new DataView(this.payload.buffer, this.payload.byteOffset, this.payload.byteLength);
    this.#view = v;
    this.version = v.getUint8(0);
    this.flags = v.getUint8(1);
    this.recordCount = v.getUint16(2);
    this.epochHi = v.getUint32(4);
    this.epochLo = v.getUint32(8);
    this.batchSeq = v.getUint32(12);
    this.hasHeader = true;
    if (this.version !== MUX_VERSION) {
      this.error = new DecodeError(
        'UnsupportedVersion',
        0,
        `mux_version ${this.version}, this node speaks ${MUX_VERSION}`,
      );
      return false;
    }
    this.#done = false;
    return true;
  }

  /** The lane in the flags byte (low nibble). */
  get lane(): number {
    return this.flags & 0x0f;
  }

  /** `peer_epoch` as a bigint (allocates; per batch at most). */
  get epoch(): bigint {
    return (BigInt(this.epochHi) << 32n) | BigInt(this.epochLo);
  }

  /** The header as an object (allocates; for tests and logging). */
  header(): BatchHeader | null {
    if (!this.hasHeader) return null;
    return {
      version: this.version,
      flags: this.flags,
      recordCount: this.recordCount,
      epoch: this.epoch,
      batchSeq: this.batchSeq,
    };
  }

  /** Size hint of the remaining records: the lower bound is always 0; the upper is the declared count. */
  sizeHint(): [lower: number, upper: number] {
    return [0, this.#done ? 0 : this.recordCount - this.index];
  }

  /** Advance to the next record. Returns false at the end or at the first error (fused). */
  next(): boolean {
    if (this.#done) return false;
    const len = this.payload.byteLength;
    const pos = this.#pos;
    if (this.index === this.recordCount) {
      this.#done = true;
      if (pos !== len)
        this.error = new DecodeError(
          'TrailingBytes',
          pos,
          `${len - pos} bytes after the declared ${this.recordCount} records`,
        );
      return false;
    }
    if (pos === len) {
      return this.#fail(
        new DecodeError(
          'RecordCountMismatch',
          pos,
          `payload ends after ${this.index} of ${this.recordCount} declared records`,
        ),
      );
    }
    if (len - pos < RECORD_HEADER_LEN) {
      return this.#fail(
        new DecodeError(
          'TruncatedRecordHeader',
          pos,
          `${len - pos} bytes left, a record header needs ${RECORD_HEADER_LEN}`,
        ),
      );
    }
    const v = this.#view;
    const type = v.getUint8(pos);
    if (type > RecordType.LifecycleSlot) {
      return this.#fail(new DecodeError('UnknownRecordType', pos, `record type ${type}`));
    }
    const bodyLength = v.getUint32(pos + 9);
    const bodyOffset = pos + RECORD_HEADER_LEN;
    if (bodyLength > len - bodyOffset) {
      return this.#fail(
        new DecodeError('TruncatedRecordBody', pos, `body declares ${bodyLength} bytes, ${len - bodyOffset} remain`),
      );
    }
    const fixed = FIXED_BODY_LEN[type]!;
    if (fixed >= 0 && bodyLength !== fixed) {
      return this.#fail(
        new DecodeError('BodyLengthMismatch', pos, `record type ${type} needs a ${fixed}-byte body, got ${bodyLength}`),
      );
    }
    if (type === RecordType.CloseSlot && v.getUint8(bodyOffset) > 3) {
      return this.#fail(new DecodeError('UnknownCloseReason', pos, `close reason ${v.getUint8(bodyOffset)}`));
    }
    if (type === RecordType.LifecycleSlot && v.getUint8(bodyOffset + 8) > 1) {
      return this.#fail(
        new DecodeError('UnknownLifecycleAction', pos, `lifecycle action ${v.getUint8(bodyOffset + 8)}`),
      );
    }
    this.recordOffset = pos;
    this.type = type;
    this.slot = v.getUint32(pos + 1);
    this.frameSeq = v.getUint32(pos + 5);
    this.bodyOffset = bodyOffset;
    this.bodyLength = bodyLength;
    this.#pos = bodyOffset + bodyLength;
    this.index++;
    return true;
  }

  /** The current record's body: a view into the payload (no copy). */
  body(): Uint8Array {
    return this.payload.subarray(this.bodyOffset, this.bodyOffset + this.bodyLength);
  }

  /** CloseSlot reason byte of the current record. */
  get closeReason(): number {
    return this.payload[this.bodyOffset] ?? 0;
  }

  /** CreditUpdate delta of the current record. */
  get creditDelta(): number {
    return this.#view.getUint32(this.bodyOffset);
  }

  /** LifecycleSlot action of the current record (0 stop, 1 cancel). */
  get lifecycleAction(): number {
    return this.payload[this.bodyOffset + 8] ?? 0;
  }

  /** OpenSlot `anchor_id` of the current record. */
  anchorId(): bigint {
    return this.#view.getBigUint64(this.bodyOffset);
  }

  /** OpenSlot `session_id` (or LifecycleSlot `session_id`) of the current record. */
  sessionId(): bigint {
    return this.#view.getBigUint64(this.type === RecordType.LifecycleSlot ? this.bodyOffset : this.bodyOffset + 8);
  }

  #fail(error: DecodeError): false {
    this.error = error;
    this.#done = true;
    return false;
  }
}

/** One decoded record as a plain object (see {@link decodeBatch}). */
export interface DecodedRecord {
  readonly offset: number;
  readonly type: number;
  readonly slot: number;
  readonly frameSeq: number;
  /** Body range into the payload. */
  readonly bodyOffset: number;
  readonly bodyLength: number;
  /** View of the body (no copy). */
  readonly body: Uint8Array;
  readonly closeReason?: number;
  readonly creditDelta?: number;
  readonly anchorId?: bigint;
  readonly sessionId?: bigint;
  readonly lifecycleAction?: number;
}

/** A whole batch decoded into objects: the records read before the first error, and that error. */
export interface DecodedBatch {
  readonly header: BatchHeader | null;
  readonly records: DecodedRecord[];
  readonly error: DecodeError | null;
}

/**
 * Decode a whole batch into objects. Convenient for tests, tools and logs; the mux's ingress uses
 * {@link BatchReader} directly so it allocates nothing per record. Never throws.
 */
export function decodeBatch(payload: Uint8Array): DecodedBatch {
  const r = new BatchReader();
  const records: DecodedRecord[] = [];
  r.reset(payload);
  while (r.next()) records.push(snapshot(r));
  return { header: r.header(), records, error: r.error };
}

/**
 * Iterate a batch as results: `{ ok: true, record }` for each record, then `{ ok: false, error }`
 * once if the batch is malformed. Fused: nothing follows an error.
 */
export function* iterateBatch(
  payload: Uint8Array,
): Generator<{ ok: true; record: DecodedRecord } | { ok: false; error: DecodeError }> {
  const r = new BatchReader();
  r.reset(payload);
  while (r.next()) yield { ok: true, record: snapshot(r) };
  if (r.error) yield { ok: false, error: r.error };
}

function snapshot(r: BatchReader): DecodedRecord {
  const base = {
    offset: r.recordOffset,
    type: r.type,
    slot: r.slot,
    frameSeq: r.frameSeq,
    bodyOffset: r.bodyOffset,
    bodyLength: r.bodyLength,
    body: r.body(),
  };
  switch (r.type) {
    case RecordType.OpenSlot:
      return { ...base, anchorId: r.anchorId(), sessionId: r.sessionId() };
    case RecordType.CloseSlot:
      return { ...base, closeReason: r.closeReason };
    case RecordType.CreditUpdate:
      return { ...base, creditDelta: r.creditDelta };
    case RecordType.LifecycleSlot:
      return { ...base, sessionId: r.sessionId(), lifecycleAction: r.lifecycleAction };
    default:
      return base;
  }
}
