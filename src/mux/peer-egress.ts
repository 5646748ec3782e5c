import { SendWindow } from '../credit/peer-window.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';

/**
 * Egress state toward one peer, shared by the batchers of all its lanes.
 *
 * - Withheld bytes: a slot without credit keeps its records in its withheld queue up to its own
 *   byte budget; this bounds the sum over the peer's slots as well, so a stalled consumer with many
 *   streams holds its producer node to about `peerByteBudget` rather than streams × `slotByteBudget`.
 * - The peer's receive window (HTTP/2's connection window): Data bodies sent toward the peer and
 *   not yet released by it. A record that does not fit waits in its slot's queue, exactly like a
 *   record waiting for credit; a release wakes every batcher of the peer that has such records.
 *   The window belongs to one link: it resets when a batcher of a newer link checks in.
 */
export class PeerEgress {
  /** Bytes in the withheld queues of every slot toward the peer. */
  withheldBytes = 0;
  readonly limit: number;
  /** The peer's window on link {@link linkEpoch}. */
  readonly sendWindow = new SendWindow();
  /** The link the window counts (-1: none yet; 0 stands for a transport without epochs). */
  linkEpoch = -1;
  readonly #metrics: MuxMetrics | null;
  #waiters: Array<() => void> = [];

  constructor(limit: number, metrics: MuxMetrics | null = null) {
    this.limit = limit;
    this.#metrics = metrics;
  }

  /** True when producers of slots without credit should wait. */
  get over(): boolean {
    return this.withheldBytes >= this.limit;
  }

  /** True if records staged on link `epoch` count against the window (it limits, and it is that link's). */
  counts(epoch: number): boolean {
    return epoch === this.linkEpoch && this.sendWindow.limited;
  }

  /** A batcher is on link `epoch` whose window is `size`: a newer link resets the window. */
  sync(epoch: number, size: number): void {
    if (epoch <= this.linkEpoch) return;
    this.linkEpoch = epoch;
    if (this.#metrics !== null) this.#metrics.sendWindowInflightBytes -= this.sendWindow.inflight;
    this.sendWindow.reset(size);
    this.#wake();
  }

  /** Count `bytes` staged on the current link. */
  charge(bytes: number): void {
    this.sendWindow.charge(bytes);
    if (this.#metrics !== null) this.#metrics.sendWindowInflightBytes += bytes;
  }

  /** Bytes charged on link `epoch` that were never sent. Ignored once the link changed. */
  uncharge(bytes: number, epoch: number): void {
    if (bytes === 0 || epoch !== this.linkEpoch) return;
    const before = this.sendWindow.inflight;
    this.sendWindow.uncharge(bytes);
    if (this.#metrics !== null) this.#metrics.sendWindowInflightBytes -= before - this.sendWindow.inflight;
    this.#wake();
  }

  /** The peer released `bytes`; returns the excess over what was in flight (a protocol error when > 0). */
  release(bytes: number): number {
    const before = this.sendWindow.inflight;
    const over = this.sendWindow.release(bytes);
    if (this.#metrics !== null) this.#metrics.sendWindowInflightBytes -= before - this.sendWindow.inflight;
    this.#wake();
    return over;
  }

  /** The peer or the node is gone: nothing is in flight any more (the gauge forgets it). */
  close(): void {
    if (this.#metrics !== null) this.#metrics.sendWindowInflightBytes -= this.sendWindow.inflight;
    this.sendWindow.reset(Number.POSITIVE_INFINITY);
    this.#waiters = [];
  }

  /** Call `cb` once, the next time room may have returned (a release, an un-charge, a new link). */
  whenRoom(cb: () => void): void {
    this.#waiters.push(cb);
  }

  #wake(): void {
    if (this.#waiters.length === 0 || !this.sendWindow.hasRoom) return;
    const w = this.#waiters;
    this.#waiters = [];
    for (let i = 0; i < w.length; i++) w[i]!();
  }
}

/** A budget that never binds (tests and hosts without a peer-wide bound). */
export const UNBOUNDED_EGRESS = (): PeerEgress => new PeerEgress(Number.POSITIVE_INFINITY);
