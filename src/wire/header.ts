import { BATCH_HEADER_LEN, FLAGS_LANE_MASK, MAX_RECORDS_PER_BATCH, MUX_VERSION } from './constants.ts';
import { DecodeError, WireError } from './errors.ts';

/** The 16-byte batch header (docs/protocol.md §10.1). */
export interface BatchHeader {
  /** `mux_version`; lanemux writes and accepts only 2. */
  readonly version: number;
  /** Flags byte, carried verbatim: low nibble = lane, high nibble reserved (written 0). */
  readonly flags: number;
  /** Number of records that follow (u16). */
  readonly recordCount: number;
  /** The sender's epoch for this (peer, lane) (u64; epochs start at 1). */
  readonly epoch: bigint;
  /** Batch sequence within the epoch (u32, compared by serial arithmetic, docs/protocol.md §10.1). */
  readonly batchSeq: number;
}

/** The lane carried in a flags byte. */
export function flagsLane(flags: number): number {
  return flags & FLAGS_LANE_MASK;
}

/** Write a batch header at `offset` of `out` (which must have 16 bytes there). */
export function writeBatchHeader(out: Uint8Array, offset: number, header: BatchHeader): void {
  const { version, flags, recordCount, epoch, batchSeq } = header;
  if (
    !isU8(version) ||
    !isU8(flags) ||
    !Number.isInteger(recordCount) ||
    recordCount < 0 ||
    recordCount > MAX_RECORDS_PER_BATCH
  ) {
    throw new WireError('ERR_INVALID_ARGUMENT', 'batch header field out of range');
  }
  if (epoch < 0n || epoch > 0xffff_ffff_ffff_ffffn || !isU32(batchSeq)) {
    throw new WireError('ERR_INVALID_ARGUMENT', 'batch header epoch or batch_seq out of range');
  }
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  v.setUint8(offset, version);
  v.setUint8(offset + 1, flags);
  v.setUint16(offset + 2, recordCount);
  v.setBigUint64(offset + 4, epoch);
  v.setUint32(offset + 12, batchSeq);
}

/** Encode a batch header to 16 fresh bytes. `version` defaults to 2. */
export function encodeBatchHeader(header: Omit<BatchHeader, 'version'> & { version?: number }): Uint8Array {
  const out = new Uint8Array(BATCH_HEADER_LEN);
  writeBatchHeader(out, 0, { ...header, version: header.version ?? MUX_VERSION });
  return out;
}

/**
 * Decode a batch header. Never throws: a payload shorter than 16 bytes is `TruncatedBatchHeader`.
 * Another version still decodes (for metering); record decoding then refuses it.
 */
export function decodeBatchHeader(payload: Uint8Array): BatchHeader | DecodeError {
  if (payload.byteLength < BATCH_HEADER_LEN) {
    return new DecodeError(
      'TruncatedBatchHeader',
      0,
      `payload is ${payload.byteLength} bytes, header needs ${BATCH_HEADER_LEN}`,
    );
  }
  const v = new DataView(payload.buffer, payload.byteOffset, BATCH_HEADER_LEN);
  return {
    version: v.getUint8(0),
    flags: v.getUint8(1),
    recordCount: v.getUint16(2),
    epoch: v.getBigUint64(4),
    batchSeq: v.getUint32(12),
  };
}

function isU8(n: number): boolean {
  return Number.isInteger(n) && n >= 0 && n <= 0xff;
}
function isU32(n: number): boolean {
  return Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff;
}
