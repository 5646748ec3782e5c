import { LanemuxError } from '../errors.ts';

/** Decode error kinds, named as in the reference (docs/protocol.md §10.4 "Decoding"). */
export type DecodeErrorKind =
  | 'TruncatedBatchHeader'
  | 'UnsupportedVersion'
  | 'TruncatedRecordHeader'
  | 'RecordCountMismatch'
  | 'TruncatedRecordBody'
  | 'UnknownRecordType'
  | 'BodyLengthMismatch'
  | 'UnknownCloseReason'
  | 'UnknownLifecycleAction'
  | 'TrailingBytes';

/** Codes of wire errors. */
export type WireErrorCode =
  | 'ERR_TRUNCATED_BATCH_HEADER'
  | 'ERR_UNSUPPORTED_VERSION'
  | 'ERR_TRUNCATED_RECORD_HEADER'
  | 'ERR_RECORD_COUNT_MISMATCH'
  | 'ERR_TRUNCATED_RECORD_BODY'
  | 'ERR_UNKNOWN_RECORD_TYPE'
  | 'ERR_BODY_LENGTH_MISMATCH'
  | 'ERR_UNKNOWN_CLOSE_REASON'
  | 'ERR_UNKNOWN_LIFECYCLE_ACTION'
  | 'ERR_TRAILING_BYTES'
  | 'ERR_BATCH_FULL'
  | 'ERR_INVALID_SLOT_ID'
  | 'ERR_INVALID_ARGUMENT'
  /** `send` was given a value an item cannot carry (a Map, a class instance, a bigint beyond 64 bits…; docs/items.md). */
  | 'ERR_INVALID_ITEM'
  | 'ERR_DESERIALIZATION';

const KIND_CODES: Record<DecodeErrorKind, WireErrorCode> = {
  TruncatedBatchHeader: 'ERR_TRUNCATED_BATCH_HEADER',
  UnsupportedVersion: 'ERR_UNSUPPORTED_VERSION',
  TruncatedRecordHeader: 'ERR_TRUNCATED_RECORD_HEADER',
  RecordCountMismatch: 'ERR_RECORD_COUNT_MISMATCH',
  TruncatedRecordBody: 'ERR_TRUNCATED_RECORD_BODY',
  UnknownRecordType: 'ERR_UNKNOWN_RECORD_TYPE',
  BodyLengthMismatch: 'ERR_BODY_LENGTH_MISMATCH',
  UnknownCloseReason: 'ERR_UNKNOWN_CLOSE_REASON',
  UnknownLifecycleAction: 'ERR_UNKNOWN_LIFECYCLE_ACTION',
  TrailingBytes: 'ERR_TRAILING_BYTES',
};

/** An error raised by the wire layer (encoder refusals, invalid SlotIds, frame decoding). */
export class WireError extends LanemuxError<WireErrorCode> {}

/**
 * A malformed batch. The decoder reports (never throws) exactly one of these per batch, with the
 * reference's `kind`, a stable `code` and the byte `offset` where decoding stopped.
 */
export class DecodeError extends LanemuxError<WireErrorCode> {
  /** The reference's name for the case, e.g. `TruncatedRecordBody`. */
  readonly kind: DecodeErrorKind;
  /** Byte offset in the payload of the record (or header) that failed. */
  readonly offset: number;

  constructor(kind: DecodeErrorKind, offset: number, detail: string) {
    super(KIND_CODES[kind], `${kind} at byte ${offset}: ${detail}`);
    this.kind = kind;
    this.offset = offset;
  }
}
