/**
 * Length-prefixed framing for byte-stream transports (Node, Deno and Bun TCP, the `tcp-stream` path).
 *
 * A frame is `[u32 length, big-endian][length bytes of message]`. The length is checked against the
 * current limit **before** anything is allocated, so a hostile or confused peer cannot make us
 * reserve more than the limit. Frames that lie entirely within one read chunk are delivered as
 * zero-copy views of it. A frame split across chunks is assembled into a buffer that grows as its
 * bytes arrive (never the announced size up front), and every byte held for it is reserved in the
 * node's {@link IncompleteFramePool}; a split frame must complete
 * within {@link FramePolicy.deadlineMs} (`frame-pool.ts`).
 *
 * @packageDocumentation
 */
import { TransportError } from './errors.ts';
import { defaultFramePolicy, type FramePolicy } from './frame-pool.ts';
import { systemRuntime, type Runtime, type TimerHandle } from '../runtime/runtime.ts';

/** Bytes of the length prefix. */
export const FRAME_PREFIX_BYTES = 4;

/**
 * Smallest buffer a split frame is assembled in: 4 KiB. It then grows to twice what has arrived,
 * so a frame trickling in is copied O(log n) times and holds at most twice its received bytes.
 */
export const MIN_PARTIAL_FRAME_BYTES = 4096;

/** Write a frame for `head ‖ body` into `out` (which must be `4 + head + body` bytes). */
export function writeFrame(out: Uint8Array, head: Uint8Array, body: Uint8Array | undefined): void {
  const len = out.byteLength - FRAME_PREFIX_BYTES;
  out[0] = len >>> 24;
  out[1] = (len >>> 16) & 0xff;
  out[2] = (len >>> 8) & 0xff;
  out[3] = len & 0xff;
  out.set(head, FRAME_PREFIX_BYTES);
  if (body !== undefined) out.set(body, FRAME_PREFIX_BYTES + head.byteLength);
}

/**
 * Called for each complete message. Returning `false` pauses the decoder: the bytes after this
 * message are held (in order) until {@link FrameDecoder.resume}.
 */
export type FrameHandler = (message: Uint8Array) => unknown;

/** Options of {@link FrameDecoder}. */
export interface FrameDecoderOptions {
  /**
   * Deliver copies instead of views of the read chunks (for consumers that keep small messages
   * long, so they do not pin whole chunks). Defaults to false.
   */
  readonly copy?: boolean;
  /** Bounds on incomplete frames: the node's pool and the large-frame deadline. Defaults to {@link defaultFramePolicy} (a pool of its own). */
  readonly policy?: FramePolicy | undefined;
  /**
   * Called from a timer when a large frame misses its deadline, after the decoder stopped and
   * released its bytes: close the connection with the error. Without it, the next push returns it.
   */
  readonly onDeadline?: ((error: TransportError) => void) | undefined;
  /** Clock and timers of the split-frame deadline. Defaults to the current runtime's. */
  readonly runtime?: Runtime | undefined;
}

const EMPTY = new Uint8Array(0);

/** Incremental decoder of length-prefixed frames, with pause/resume for receive-side back-pressure. */
export class FrameDecoder {
  /** Largest message length accepted; checked before allocation. */
  limit: number;
  readonly #label: string;
  readonly #copy: boolean;
  readonly #policy: FramePolicy;
  readonly #onDeadline: ((error: TransportError) => void) | undefined;
  readonly #rt: Runtime;
  // Partial length prefix (0..3 bytes seen so far).
  readonly #prefix = new Uint8Array(FRAME_PREFIX_BYTES);
  #prefixFill = 0;
  // The split frame being assembled: its announced length (0 = none), the bytes so far, and a buffer
  // that grows as they arrive. The buffer's whole capacity is reserved in the pool.
  #bodyLen = 0;
  #body: Uint8Array = EMPTY;
  #bodyFill = 0;
  // Deadline of a large split frame: the timer, when it fires, and what was left when suspended.
  #deadline: TimerHandle | undefined;
  #deadlineAt = 0;
  #deadlineLeft = -1;
  #stopped = false;
  // An error to report from the next push (a deadline without `onDeadline`, a refused hold).
  #failure: TransportError | undefined;
  // Chunks received while paused, in order; their bytes are reserved in the pool too.
  readonly #held: Uint8Array[] = [];
  #heldBytes = 0;
  #paused = false;

  /**
   * @param limit - largest message length accepted.
   * @param label - names the peer in errors.
   */
  constructor(limit: number, label: string, options: FrameDecoderOptions = {}) {
    this.limit = limit;
    this.#label = label;
    this.#copy = options.copy ?? false;
    this.#policy = options.policy ?? defaultFramePolicy();
    this.#onDeadline = options.onDeadline;
    this.#rt = options.runtime ?? systemRuntime();
  }

  /** True while a handler asked to pause and the held bytes wait for {@link resume}. */
  get paused(): boolean {
    return this.#paused;
  }

  /** True when a frame was started but not finished (a stream that ends now was cut mid-frame). */
  get midFrame(): boolean {
    return this.#prefixFill > 0 || this.#bodyLen !== 0 || this.#heldBytes > 0;
  }

  /** Bytes this decoder holds reserved in the pool now (split frame buffer plus held chunks). */
  get reservedBytes(): number {
    return this.#body.byteLength + this.#heldBytes;
  }

  /** Stop delivering (the connection is closing) and release every reserved byte; later pushes are ignored. Idempotent. */
  stop(): void {
    this.#stopped = true;
    this.#endBody();
    if (this.#heldBytes > 0) this.#policy.pool.release(this.#heldBytes);
    this.#held.length = 0;
    this.#heldBytes = 0;
  }

  /**
   * Feed one chunk; calls `onFrame` for each complete message in order. Returns an error (and stops)
   * if a frame announces more than the limit (`ERR_FRAME_TOO_LARGE`), the pool refuses the bytes a
   * split frame needs, or a large frame missed its deadline (`ERR_FRAME_DEADLINE`). `onFrame` may call
   * `stop()` to end delivery at once, or return false to pause.
   */
  push(chunk: Uint8Array, onFrame: FrameHandler): TransportError | undefined {
    if (this.#stopped) return this.#takeFailure();
    if (this.#paused) return this.#hold(chunk, false);
    return this.#parse(chunk, onFrame);
  }

  /** Resume after a handler paused: deliver the held bytes (which may pause again). */
  resume(onFrame: FrameHandler): TransportError | undefined {
    if (!this.#paused) return undefined;
    this.#paused = false;
    while (this.#held.length > 0 && !this.#paused && !this.#stopped) {
      const chunk = this.#held.shift() as Uint8Array;
      this.#heldBytes -= chunk.byteLength;
      this.#policy.pool.release(chunk.byteLength);
      const error = this.#parse(chunk, onFrame);
      if (error !== undefined) return error;
    }
    return undefined;
  }

  /**
   * The connection stopped reading from the wire (our back-pressure, not the peer's delay): stop the
   * clock of a large frame in progress until {@link resumeDeadline}.
   */
  suspendDeadline(): void {
    if (this.#deadline === undefined) return;
    this.#rt.clearTimer(this.#deadline);
    this.#deadline = undefined;
    this.#deadlineLeft = Math.max(0, this.#deadlineAt - this.#rt.now());
  }

  /** Reading resumed: the suspended deadline runs again for the time it had left. */
  resumeDeadline(): void {
    if (this.#deadlineLeft < 0 || this.#stopped) return;
    this.#arm(this.#deadlineLeft);
  }

  #takeFailure(): TransportError | undefined {
    const f = this.#failure;
    this.#failure = undefined;
    return f;
  }

  /**
   * Keep bytes that arrived while paused (at the back) or the rest of the chunk a pause cut (at the
   * front, before anything held later). They are views of read chunks, counted at their length.
   */
  #hold(bytes: Uint8Array, front: boolean): TransportError | undefined {
    const n = bytes.byteLength;
    if (n === 0) return undefined;
    if (!this.#policy.pool.tryReserve(n)) return this.#full(n);
    if (front) this.#held.unshift(bytes);
    else this.#held.push(bytes);
    this.#heldBytes += n;
    return undefined;
  }

  /** The pool refused `n` more bytes: stop, and say why. */
  #full(n: number): TransportError {
    const pool = this.#policy.pool;
    const large = this.#bodyLen > this.#policy.largeFrameBytes;
    const frame = this.#bodyLen !== 0 ? ` for a ${this.#bodyLen}-byte frame (${this.#bodyFill} bytes arrived)` : '';
    const bound = large ? `${pool.largeLimit} bytes for large frames, of ${pool.limit}` : `${pool.limit} bytes`;
    const error = new TransportError(
      'ERR_FRAME_DEADLINE',
      `the node's memory for incomplete frames is full (${pool.held} bytes held, at most ${bound}): closing ${this.#label}, which needed ${n} more bytes${frame}`,
    );
    this.stop();
    return error;
  }

  #deliver(message: Uint8Array, chunk: Uint8Array, next: number, onFrame: FrameHandler): boolean {
    if (onFrame(message) !== false || this.#stopped) return true;
    this.#paused = true;
    if (next < chunk.byteLength) this.#failure = this.#hold(chunk.subarray(next), true);
    return false;
  }

  #parse(chunk: Uint8Array, onFrame: FrameHandler): TransportError | undefined {
    let off = 0;
    const end = chunk.byteLength;
    while (off < end && !this.#stopped) {
      if (this.#bodyLen !== 0) {
        // Continue assembling a split frame, growing its buffer only as far as its bytes arrive.
        const n = Math.min(this.#bodyLen - this.#bodyFill, end - off);
        const fill = this.#bodyFill + n;
        if (fill > this.#body.byteLength) {
          const error = this.#grow(fill);
          if (error !== undefined) return error;
        }
        this.#body.set(chunk.subarray(off, off + n), this.#bodyFill);
        this.#bodyFill = fill;
        off += n;
        if (fill === this.#bodyLen) {
          const body = this.#body;
          this.#endBody();
          if (!this.#deliver(body, chunk, off, onFrame)) return this.#takeFailure();
        }
        continue;
      }
      let len: number;
      if (this.#prefixFill === 0 && end - off >= FRAME_PREFIX_BYTES) {
        // Fast path: the whole prefix is here.
        len =
          (chunk[off] as number) * 0x1000000 +
          (((chunk[off + 1] as number) << 16) | ((chunk[off + 2] as number) << 8) | (chunk[off + 3] as number));
        off += FRAME_PREFIX_BYTES;
      } else {
        while (this.#prefixFill < FRAME_PREFIX_BYTES && off < end)
          this.#prefix[this.#prefixFill++] = chunk[off++] as number;
        if (this.#prefixFill < FRAME_PREFIX_BYTES) return undefined;
        const p = this.#prefix;
        len = (p[0] as number) * 0x1000000 + (((p[1] as number) << 16) | ((p[2] as number) << 8) | (p[3] as number));
        this.#prefixFill = 0;
      }
      if (len > this.limit) {
        this.stop();
        return new TransportError(
          'ERR_FRAME_TOO_LARGE',
          `frame of ${len} bytes from ${this.#label} exceeds the limit of ${this.limit} bytes`,
        );
      }
      if (end - off >= len) {
        // Whole message inside this chunk: a view (no copy), unless copies were asked for.
        const message = this.#copy ? copyOut(chunk, off, off + len) : chunk.subarray(off, off + len);
        off += len;
        if (!this.#deliver(message, chunk, off, onFrame)) return this.#takeFailure();
      } else {
        // Split frame (len ≥ 1 here): the loop above copies what this chunk holds of it. Every split
        // frame has the deadline, whatever its size: frames just under the large-frame size, held a
        // byte short on many lanes, would otherwise pin the pool for good.
        this.#bodyLen = len;
        this.#arm(this.#policy.deadlineMs);
      }
    }
    return undefined;
  }

  /** Make room for `need` bytes of the split frame, reserving the growth first. */
  #grow(need: number): TransportError | undefined {
    const pool = this.#policy.pool;
    const old = this.#body.byteLength;
    const large = this.#bodyLen > this.#policy.largeFrameBytes;
    let cap = Math.min(this.#bodyLen, Math.max(MIN_PARTIAL_FRAME_BYTES, 2 * need));
    if (!pool.tryReserve(cap - old, large)) {
      // No room for headroom: try exactly what has arrived before giving up on the connection.
      cap = need;
      if (!pool.tryReserve(cap - old, large)) return this.#full(need - old);
    }
    const body = new Uint8Array(cap);
    body.set(this.#body.subarray(0, this.#bodyFill));
    this.#body = body;
    return undefined;
  }

  /** Forget the split frame (complete or abandoned): release its bytes and its deadline. */
  #endBody(): void {
    if (this.#deadline !== undefined) this.#rt.clearTimer(this.#deadline);
    this.#deadline = undefined;
    this.#deadlineLeft = -1;
    if (this.#body.byteLength > 0) this.#policy.pool.release(this.#body.byteLength);
    this.#body = EMPTY;
    this.#bodyLen = 0;
    this.#bodyFill = 0;
  }

  #arm(ms: number): void {
    this.#deadlineLeft = -1;
    this.#deadlineAt = this.#rt.now() + ms;
    this.#deadline = this.#rt.setTimer(this.#expire, ms);
  }

  readonly #expire = (): void => {
    this.#deadline = undefined;
    if (this.#stopped) return;
    const p = this.#policy;
    const error = new TransportError(
      'ERR_FRAME_DEADLINE',
      `frame of ${this.#bodyLen} bytes from ${this.#label} did not complete within ${p.deadlineMs} ms of its first byte ` +
        `(${this.#bodyFill} bytes arrived)`,
    );
    this.stop();
    if (this.#onDeadline !== undefined) this.#onDeadline(error);
    else this.#failure = error;
  };
}

/** A plain Uint8Array copy (a Node Buffer's `slice` is a view, and its species is Buffer). */
function copyOut(chunk: Uint8Array, start: number, end: number): Uint8Array {
  const out = new Uint8Array(end - start);
  out.set(chunk.subarray(start, end));
  return out;
}
