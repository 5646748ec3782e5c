/**
 * The peer window as ingress charges it (the account is the mux's `PeerWindowIn`, peer-window.ts):
 * its interface, and the release of records and batches dropped before they were decoded, which
 * the sender counted all the same.
 */
import { RecordType } from '../wire/constants.ts';
import type { BatchReader } from '../wire/decoder.ts';
import { FRAME_HEARTBEAT } from '../wire/frame.ts';
import type { WindowSink } from './slot-buffer.ts';

/** Body length of the `Heartbeat` frame: a Data record with exactly this body never counts against the peer window. */
export const HEARTBEAT_BODY = FRAME_HEARTBEAT.byteLength;

/**
 * The receive window of one peer's link as ingress uses it (the mux's account; see
 * `ReceiveWindow`). Every Data body but a heartbeat is charged when kept (slot buffer or hold),
 * released when it leaves, or reported as dropped when it is not kept: the sender counted it.
 */
export interface IngressWindow extends WindowSink {
  /** Holding `bytes` more would exceed the window plus one batch (a sender that ignores the window). */
  overruns(bytes: number): boolean;
  charge(bytes: number): void;
  release(bytes: number): void;
  /** `bytes` arrived and were never held: dropped, or taken at once by a waiting reader. */
  dropped(bytes: number): void;
  /** The window's fill, held / size (0 when it limits nothing), and its size in bytes: credit auto-tuning reads them. */
  fill?(): number;
  readonly sizeBytes?: number;
}

/** A window that counts nothing and limits nothing (tables built without a mux). */
export const INERT_WINDOW: IngressWindow = Object.freeze({
  overruns: () => false,
  charge: () => {},
  release: () => {},
  dropped: () => {},
});

/** True if the record's body is exactly the `Heartbeat` frame (checked without decoding). */
function isHeartbeatRecord(r: BatchReader): boolean {
  if (r.bodyLength !== HEARTBEAT_BODY) return false;
  const buf = r.payload;
  const off = r.bodyOffset;
  for (let i = 0; i < HEARTBEAT_BODY; i++) if (buf[off + i] !== FRAME_HEARTBEAT[i]) return false;
  return true;
}

/** Release one dropped record's body to the window, as the sender charged it (heartbeats never count). */
export function releaseRecord(r: BatchReader, w: IngressWindow): void {
  if (r.type === RecordType.Data && !isHeartbeatRecord(r)) w.dropped(r.bodyLength);
}

/**
 * A batch dropped whole (stale epoch, wrong lane): release what the sender charged for it, the
 * whole length of a staged batch or each Data body of a lane batch. `reader` must be at its start.
 */
export function releaseUnkept(reader: BatchReader, w: IngressWindow, staged: number): void {
  if (staged > 0) {
    w.dropped(staged);
    return;
  }
  while (reader.next()) releaseRecord(reader, w);
}
