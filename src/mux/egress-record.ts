/**
 * The batcher's per-record helpers: how a withheld record of each `EgressKind` is appended to the
 * open batch, what it costs there (record bytes, and at most what it charges the peer window), what
 * staging it answered (`EMIT_*`), and the error a producer gets when the consumer closes its slot.
 * Plain functions on numbers and the record's value: the batcher calls them per record, so they
 * allocate nothing.
 */
import { BATCH_HEADER_LEN, CLOSE_RECORD_LEN, CloseReason, RECORD_HEADER_LEN } from '../wire/constants.ts';
import type { BatchEncoder } from '../wire/encoder.ts';
import { itemBytesLength, itemStringLength, itemStringMaxLength } from '../wire/frame.ts';
import { formatSlotId } from '../wire/slot-id.ts';
import { EgressKind, type EgressSlot } from './egress-slot.ts';
import { MuxError } from './errors.ts';

/**
 * Why the consumer closed an owned slot, as its producer is told. UnknownSlot after a cancel of the
 * same session is the cancel (`ERR_STREAM_CANCELLED`, a stream error code): a producer waiting in
 * `send` learns it as one whose next `send` would.
 */
export function peerCloseError(slot: EgressSlot, reason: number): MuxError {
  if (reason === CloseReason.ProtocolError) {
    return new MuxError(
      'ERR_PROTOCOL',
      `the consumer ended the stream on ${formatSlotId(slot.id)} for a protocol error (ProtocolError: credit overspend, hold overflow, receive-window overrun, or a slot index out of range or in use)`,
    );
  }
  if (slot.cancelled) return new MuxError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream');
  return new MuxError(
    'ERR_UNKNOWN_SLOT',
    `the consumer has no stream on ${formatSlotId(slot.id)} (UnknownSlot): it never bound one for this session, its accept window expired, its watchdog ended it, or its reader went away`,
  );
}

/** Append one data record of `kind` (an Item string, Item bytes, or a pre-encoded body). */
export function appendRecord(enc: BatchEncoder, slot: number, seq: number, kind: number, value: unknown): void {
  if (kind === EgressKind.ItemString) enc.appendItemString(slot, seq, value as string);
  else if (kind === EgressKind.ItemBytes) enc.appendItemBytes(slot, seq, value as Uint8Array);
  else enc.appendData(slot, seq, value as Uint8Array);
}

/** The most bytes a record body of `kind` takes (an Item string's UTF-8 bound). */
export function bodyUpperBound(kind: number, value: unknown): number {
  if (kind === EgressKind.ItemString) return itemStringMaxLength(value as string);
  if (kind === EgressKind.ItemBytes) return itemBytesLength((value as Uint8Array).byteLength);
  return (value as Uint8Array).byteLength;
}

/** What a queued record will charge the peer window, at most: its body, or a singleton's whole batch. */
export function windowBytes(kind: number, value: unknown, cap: number): number {
  const body = bodyUpperBound(kind, value);
  const batch = BATCH_HEADER_LEN + RECORD_HEADER_LEN + body + (kind === EgressKind.Terminal ? CLOSE_RECORD_LEN : 0);
  return batch > cap ? batch : body;
}

/** Bytes a record of `kind` adds to the open batch: its 13-byte header and its body. */
export function recordBytes(kind: number, value: unknown): number {
  if (kind === EgressKind.ItemString) return RECORD_HEADER_LEN + itemStringLength(value as string);
  return RECORD_HEADER_LEN + bodyUpperBound(kind, value);
}

// What staging one record answered (the batcher's files pass it up to `offer` and the release loop).
/** Staged. */
export const EMIT_OK = 0;
/** Nothing staged: a flush parked the batcher, or the record waits for staging room. */
export const EMIT_PARKED = 1;
/** The record can never go (over `stagedPayloadMax`): its slot was failed. */
export const EMIT_TOO_LARGE = 2;
/** The peer window is full: nothing staged, the slot waits for a release. */
export const EMIT_WINDOW = 3;
