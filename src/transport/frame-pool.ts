/**
 * Memory held in frames that have not arrived whole yet, bounded per node.
 *
 * A byte-stream peer that announces a large frame and then sends all but its last byte must not
 * make the node hold the announced size, nor hold what it did send forever. Adapters that frame a
 * byte stream therefore allocate a partial frame only as its bytes arrive, reserve what they hold
 * here (one pool per node, shared by every connection), and give a frame larger than
 * {@link FramePolicy.largeFrameBytes} {@link FramePolicy.deadlineMs} to complete. A connection whose
 * reservation is refused, or whose frame misses its deadline, is closed; nothing else is disturbed.
 *
 * @packageDocumentation
 */

/** Bytes in incomplete frames across every connection of one node. */
export class IncompleteFramePool {
  /** Most bytes all incomplete frames of the node may hold together. */
  readonly limit: number;
  /**
   * Most bytes frames over {@link FramePolicy.largeFrameBytes} may hold together: three quarters of
   * {@link limit}. The last quarter is kept for ordinary frames, so that links sending large frames
   * (the ones an attacker announces) are refused while links sending batches keep working.
   */
  readonly largeLimit: number;
  #held = 0;

  constructor(limit: number) {
    this.limit = limit;
    this.largeLimit = Math.floor(limit * 0.75);
  }

  /** Bytes held now. */
  get held(): number {
    return this.#held;
  }

  /**
   * Reserve `n` more bytes; false (and nothing reserved) when the pool would exceed its limit, or,
   * for a `large` frame, {@link largeLimit}.
   */
  tryReserve(n: number, large = false): boolean {
    if (this.#held + n > (large ? this.largeLimit : this.limit)) return false;
    this.#held += n;
    return true;
  }

  /** Give back `n` reserved bytes (a frame completed, or its connection closed). */
  release(n: number): void {
    this.#held = Math.max(0, this.#held - n);
  }
}

/** How incomplete frames are bounded, handed to adapters with every listen and dial. */
export interface FramePolicy {
  /** The node's pool. */
  readonly pool: IncompleteFramePool;
  /** A frame announcing more than this many bytes must complete within {@link deadlineMs}. */
  readonly largeFrameBytes: number;
  /** Time a large frame has from its first byte to its last. */
  readonly deadlineMs: number;
}

/** Default bound of the node's pool: 64 MiB. */
export const DEFAULT_INCOMPLETE_FRAME_BYTES = 64 * 1024 * 1024;
/** Default size above which a frame has a deadline: 64 KiB (a default mux batch is at most 60 KiB). */
export const DEFAULT_LARGE_FRAME_BYTES = 64 * 1024;
/** Default deadline of a large frame: 10 s (1 MiB at 100 kB/s). */
export const DEFAULT_FRAME_DEADLINE_MS = 10_000;

/**
 * A policy with the defaults and a pool of its own, for an adapter used without a node (no
 * `framePolicy` in its `ListenHost` or `DialRequest`): its connections are still bounded, only not
 * together with any other adapter's.
 */
export function defaultFramePolicy(): FramePolicy {
  return {
    pool: new IncompleteFramePool(DEFAULT_INCOMPLETE_FRAME_BYTES),
    largeFrameBytes: DEFAULT_LARGE_FRAME_BYTES,
    deadlineMs: DEFAULT_FRAME_DEADLINE_MS,
  };
}
