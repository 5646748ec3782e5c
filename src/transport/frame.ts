/**
 * Length-prefixed framing for byte-stream transports (Node TCP now; Deno and Bun TCP later).
 *
 * A frame is `[u32 length, big-endian][length bytes of message]`. The length is checked against the
 * current limit **before** anything is allocated, so a hostile or confused peer cannot make us
 * reserve more than the limit. Frames that lie entirely within one read chunk are delivered as
 * zero-copy views of it; only a frame split across chunks is assembled, into one allocation of
 * exactly its size.
 *
 * @packageDocumentation
 */
import { TransportError } from './errors.ts';

/** Bytes of the length prefix. */
export const FRAME_PREFIX_BYTES = 4;

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

/** Incremental decoder of length-prefixed frames, with pause/resume for receive-side back-pressure. */
export class FrameDecoder {
  /** Largest message length accepted; checked before allocation. */
  limit: number;
  readonly #label: string;
  readonly #copy: boolean;
  // Partial length prefix (0..3 bytes seen so far).
  readonly #prefix = new Uint8Array(FRAME_PREFIX_BYTES);
  #prefixFill = 0;
  // Partial message being assembled (allocated once its length is known and within the limit).
  #body: Uint8Array | undefined;
  #bodyFill = 0;
  #stopped = false;
  // Bytes received while paused, in order.
  #held: Uint8Array | null = null;
  #paused = false;

  /**
   * @param limit - largest message length accepted.
   * @param label - names the peer in errors.
   * @param options.copy - deliver copies instead of views of the read chunks (for consumers that
   *   keep small messages long, so they do not pin whole chunks). Defaults to false.
   */
  constructor(limit: number, label: string, options: { copy?: boolean } = {}) {
    this.limit = limit;
    this.#label = label;
    this.#copy = options.copy ?? false;
  }

  /** True while a handler asked to pause and the held bytes wait for {@link resume}. */
  get paused(): boolean {
    return this.#paused;
  }

  /** True when a frame was started but not finished (a stream that ends now was cut mid-frame). */
  get midFrame(): boolean {
    return this.#prefixFill > 0 || this.#body !== undefined || (this.#held !== null && this.#held.byteLength > 0);
  }

  /** Stop delivering (the connection is closing); later pushes are ignored. */
  stop(): void {
    this.#stopped = true;
    this.#body = undefined;
    this.#held = null;
  }

  /**
   * Feed one chunk; calls `onFrame` for each complete message in order. Returns an error (and stops)
   * if a frame announces more than the limit. `onFrame` may call `stop()` to end delivery at once,
   * or return false to pause.
   */
  push(chunk: Uint8Array, onFrame: FrameHandler): TransportError | undefined {
    if (this.#stopped) return undefined;
    if (this.#paused) {
      this.#held = this.#held === null ? chunk : concat(this.#held, chunk);
      return undefined;
    }
    return this.#parse(chunk, onFrame);
  }

  /** Resume after a handler paused: deliver the held bytes (which may pause again). */
  resume(onFrame: FrameHandler): TransportError | undefined {
    if (!this.#paused) return undefined;
    this.#paused = false;
    const held = this.#held;
    this.#held = null;
    return held === null ? undefined : this.#parse(held, onFrame);
  }

  #deliver(message: Uint8Array, chunk: Uint8Array, next: number, onFrame: FrameHandler): boolean {
    if (onFrame(message) === false && !this.#stopped) {
      this.#paused = true;
      if (next < chunk.byteLength) this.#held = chunk.subarray(next);
      return false;
    }
    return true;
  }

  #parse(chunk: Uint8Array, onFrame: FrameHandler): TransportError | undefined {
    let off = 0;
    const end = chunk.byteLength;
    while (off < end && !this.#stopped) {
      if (this.#body !== undefined) {
        // Continue assembling a split frame.
        const body = this.#body;
        const n = Math.min(body.byteLength - this.#bodyFill, end - off);
        body.set(chunk.subarray(off, off + n), this.#bodyFill);
        this.#bodyFill += n;
        off += n;
        if (this.#bodyFill === body.byteLength) {
          this.#body = undefined;
          if (!this.#deliver(body, chunk, off, onFrame)) return undefined;
        }
        continue;
      }
      let len: number;
      if (this.#prefixFill === 0 && end - off >= FRAME_PREFIX_BYTES) {
        // Fast path: the whole prefix is here.
        len = ((chunk[off] as number) * 0x1000000) + (((chunk[off + 1] as number) << 16) | ((chunk[off + 2] as number) << 8) | (chunk[off + 3] as number));
        off += FRAME_PREFIX_BYTES;
      } else {
        while (this.#prefixFill < FRAME_PREFIX_BYTES && off < end) this.#prefix[this.#prefixFill++] = chunk[off++] as number;
        if (this.#prefixFill < FRAME_PREFIX_BYTES) return undefined;
        const p = this.#prefix;
        len = ((p[0] as number) * 0x1000000) + (((p[1] as number) << 16) | ((p[2] as number) << 8) | (p[3] as number));
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
        if (!this.#deliver(message, chunk, off, onFrame)) return undefined;
      } else {
        this.#body = new Uint8Array(len);
        this.#bodyFill = 0;
      }
    }
    return undefined;
  }
}

/** A plain Uint8Array copy (a Node Buffer's `slice` is a view, and its species is Buffer). */
function copyOut(chunk: Uint8Array, start: number, end: number): Uint8Array {
  const out = new Uint8Array(end - start);
  out.set(chunk.subarray(start, end));
  return out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}
