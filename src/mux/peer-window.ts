/**
 * The peer window on the mux path (`messenger-mux-v2`): the receiver's per-peer account and the
 * one-way update that releases bytes to the sender (the sender's side lives in {@link PeerEgress}).
 *
 * Wire: a messenger MESSAGE (fire-and-forget) named {@link WINDOW_HANDLER} on lane 0 whose payload
 * is the released byte count as a u64, big-endian (exactly 8 bytes, nonzero, ≤ 2^53 − 1). It is
 * sent only to a peer that advertised a window in its HELLO (a this-version peer) and only when
 * this node advertised one too; a malformed body is counted and ignored.
 *
 * Rendezvous transfers keep their own budget for the bytes being staged and pulled
 * (`max(peerByteBudget, stagedPayloadMax)` staged out, one transfer assembled at a time per peer);
 * the window counts a singleton once it is staged (its whole batch length), like any Data record.
 *
 * @see PeerEgress
 */
import type { ReceiveWindow } from '../credit/peer-window.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { PeerId } from '../messenger/types.ts';
import type { IngressWindow } from './ingress-window.ts';

/** Handler name of the peer-window update (one-way; body: u64 big-endian released bytes). */
export const WINDOW_HANDLER = '_stream_window';

/** Length of an update body. */
export const WINDOW_UPDATE_BYTES = 8;

/** Write `bytes` (a safe integer) as an update body into `out` (8 bytes). */
export function encodeWindowUpdate(bytes: number, out: Uint8Array): Uint8Array {
  const hi = Math.floor(bytes / 2 ** 32);
  const lo = bytes >>> 0;
  out[0] = hi >>> 24;
  out[1] = (hi >>> 16) & 0xff;
  out[2] = (hi >>> 8) & 0xff;
  out[3] = hi & 0xff;
  out[4] = lo >>> 24;
  out[5] = (lo >>> 16) & 0xff;
  out[6] = (lo >>> 8) & 0xff;
  out[7] = lo & 0xff;
  return out;
}

/** The released byte count of an update body, or -1 if malformed (wrong length, 0, or above 2^53 − 1). */
export function decodeWindowUpdate(body: Uint8Array): number {
  if (body.byteLength !== WINDOW_UPDATE_BYTES) return -1;
  const hi = ((body[0]! << 24) | (body[1]! << 16) | (body[2]! << 8) | body[3]!) >>> 0;
  const lo = ((body[4]! << 24) | (body[5]! << 16) | (body[6]! << 8) | body[7]!) >>> 0;
  if (hi > 0x1f_ffff) return -1;
  const n = hi * 2 ** 32 + lo;
  return n === 0 ? -1 : n;
}

/** What a receive account needs from its mux. */
export interface PeerWindowHost {
  readonly metrics: MuxMetrics;
  /** A report is due for `w`: send it soon (coalesced: called once until {@link PeerWindowIn.pending} clears). */
  reportDue(w: PeerWindowIn): void;
}

/**
 * The receive window of one peer's link: what its records hold in this node and what was released
 * and not yet reported. A newer link gets a new account; buffers charged to the old one still
 * release into it (their bytes are real memory, counted in the gauge) but it reports nothing.
 */
export class PeerWindowIn implements IngressWindow {
  readonly peer: PeerId;
  /** The link (messenger epoch) this account belongs to. */
  readonly epoch: number;
  readonly account: ReceiveWindow;
  /** Replaced by a newer link's account, or the peer or node is gone: no more reports. */
  dead = false;
  /** An update is scheduled and not yet sent. */
  pending = false;
  readonly #host: PeerWindowHost;
  readonly #metrics: MuxMetrics;

  constructor(host: PeerWindowHost, peer: PeerId, epoch: number, account: ReceiveWindow) {
    this.#host = host;
    this.#metrics = host.metrics;
    this.peer = peer;
    this.epoch = epoch;
    this.account = account;
  }

  /** Held / size, 0 when the window is not enforced (credit auto-tuning's memory pressure). */
  fill(): number {
    const a = this.account;
    return a.active ? a.held / a.size : 0;
  }

  /** The window's size in bytes, `Infinity` when not enforced. */
  get sizeBytes(): number {
    return this.account.active ? this.account.size : Number.POSITIVE_INFINITY;
  }

  overruns(bytes: number): boolean {
    return this.account.overruns(bytes);
  }

  charge(bytes: number): void {
    const a = this.account;
    const due = a.charge(bytes);
    const m = this.#metrics;
    m.receiveWindowHeldBytes += bytes;
    if (a.held > m.receiveWindowPeakBytes) m.receiveWindowPeakBytes = a.held;
    if (due) this.#due();
  }

  release(bytes: number): void {
    const a = this.account;
    const before = a.held;
    const due = a.release(bytes);
    this.#metrics.receiveWindowHeldBytes -= before - a.held;
    if (due) this.#due();
  }

  dropped(bytes: number): void {
    if (this.account.dropped(bytes)) this.#due();
  }

  /** Ask for a report if one is owed and none is scheduled (the sweep's backstop). */
  flushIfPending(): void {
    if (this.account.pending) this.#due();
  }

  #due(): void {
    if (this.pending || this.dead) return;
    this.pending = true;
    this.#host.reportDue(this);
  }
}
