/**
 * Wire constants of the `_stream_batch` payload (docs/protocol.md §10). These must match the
 * reference implementation exactly.
 */

/** `mux_version` written in byte 0 of every batch. v2 added `LifecycleSlot`. A receiver accepts only its own version. */
export const MUX_VERSION = 2;
/** Batch header: `[u8 version][u8 flags][u16 record_count][u64 peer_epoch][u32 batch_seq]`, big-endian. */
export const BATCH_HEADER_LEN = 16;
/** Record header: `[u8 record_type][u32 slot][u32 frame_seq][u32 len]`, big-endian. */
export const RECORD_HEADER_LEN = 13;
/** `record_count` is a u16: a batch holds at most 65,535 records, then refuses more (`BatchFull`). */
export const MAX_RECORDS_PER_BATCH = 65_535;
/** SlotId index is a u24. */
export const MAX_SLOT_INDEX = 0x00ff_ffff;
/** Number of lanes per peer; the lane rides the low nibble of the flags byte. */
export const MAX_LANES = 16;
/** Smallest `maxMessageSize` accepted in options: a mux batch cap never goes below 29 B plus envelope. */
export const MIN_MAX_MESSAGE_SIZE = 256;
/** Largest `maxMessageSize` accepted in options (256 MiB): a finite bound on any single allocation. */
export const MAX_MAX_MESSAGE_SIZE = 256 * 1024 * 1024;
/** Longest credential a HELLO carries. */
export const MAX_CREDENTIAL_LENGTH = 8192;
/** Bit 63 of an anchor's local id marks an MPSC anchor (the low half of its handle, docs/protocol.md §8). */
export const MPSC_ANCHOR_BIT = 1n << 63n;
/** The transport key of the per-stream path (docs/protocol.md §9). */
export const TCP_STREAM_KEY = 'tcp-stream';
/** Low nibble of `flags` is the lane; the high nibble is reserved and written 0. */
export const FLAGS_LANE_MASK = 0x0f;
/** Floor of the batch cap after all clamps: one header plus one empty record (16 + 13). */
export const MIN_BATCH_CAP = BATCH_HEADER_LEN + RECORD_HEADER_LEN;
/** Default configured batch cap, `max_batch_bytes`: 60 KiB. */
export const DEFAULT_MAX_BATCH_BYTES = 61_440;
/** The shared coalescing writer stages only frames under this size: 64 KiB. */
export const COALESCE_THRESHOLD = 65_536;
/** Bytes a CloseSlot record takes (13-byte header + 1-byte reason); reserved after a terminal. */
export const CLOSE_RECORD_LEN = RECORD_HEADER_LEN + 1;

/** Record types (the `record_type` byte). */
export const RecordType = {
  /** Opaque StreamFrame bytes, owner → receiver. */
  Data: 0,
  /** `[u64 anchor_id][u64 session_id]`, exactly 16 B; frame_seq 0. */
  OpenSlot: 1,
  /** Exactly 1 B: the close reason. */
  CloseSlot: 2,
  /** Exactly 4 B: `[u32 delta]`, receiver → owner; names the owner's SlotId. */
  CreditUpdate: 3,
  /** Empty; delivered as the cached Heartbeat frame. No sender emits it. */
  SlotHeartbeat: 4,
  /** v2: `[u64 session_id][u8 action]`, exactly 9 B; consumer → owner. */
  LifecycleSlot: 5,
} as const;
export type RecordType = (typeof RecordType)[keyof typeof RecordType];

/** Fixed body lengths per record type (-1: variable). Indexed by record type. */
export const FIXED_BODY_LEN: readonly number[] = [-1, 16, 1, 4, 0, 9];

/** Close reasons (the CloseSlot body byte). The reason carries the direction (docs/protocol.md §10.3). */
export const CloseReason = {
  /** owner → receiver: the terminal went out just before. The only reason that does not inject `Dropped`. */
  TerminalSent: 0,
  /** owner → receiver: producer left without a terminal, or epoch death. */
  PeerGone: 1,
  /** receiver → owner: no bind for (anchor, session), accept window expired, or consumer gone. */
  UnknownSlot: 2,
  /** receiver → owner: credit overspend, hold overflow, slot index out of range, or index collision. */
  ProtocolError: 3,
} as const;
export type CloseReason = (typeof CloseReason)[keyof typeof CloseReason];

/** Names of close reasons, indexed by code. */
export const CLOSE_REASON_NAMES = ['TerminalSent', 'PeerGone', 'UnknownSlot', 'ProtocolError'] as const;

/** LifecycleSlot actions. */
export const LifecycleAction = {
  Stop: 0,
  Cancel: 1,
} as const;
export type LifecycleAction = (typeof LifecycleAction)[keyof typeof LifecycleAction];

/** Control records never occupy the slot buffer and never spend data credit (CODEC-37). */
export function isControlRecord(type: number): boolean {
  return (
    type === RecordType.OpenSlot ||
    type === RecordType.CloseSlot ||
    type === RecordType.CreditUpdate ||
    type === RecordType.LifecycleSlot
  );
}

/** Handler name of a lane's batch messages: `_stream_batch` for lane 0, `_stream_batch.k` for lanes 1..15. */
export function batchHandlerName(lane: number): string {
  return lane === 0 ? '_stream_batch' : `_stream_batch.${lane}`;
}

/** The mux transport key (`messenger-mux-v2`). Keys match as exact strings. */
export const MESSENGER_MUX_KEY = 'messenger-mux-v2';
