/**
 * The producer's view of where its frames go: a mux slot, the anchor itself (same worker), or a
 * dedicated per-stream connection (legacy). `StreamSender` is written once against this.
 */
import type { LanemuxError } from '../errors.ts';
import { Offer } from '../mux/egress-slot.ts';
import { EgressKind } from '../mux/egress-slot.ts';
import type { EgressSlot } from '../mux/egress-slot.ts';
import { encodeItemBody } from '../wire/plain-item.ts';
import { FRAME_DETACHED, FRAME_DROPPED, FRAME_FINALIZED, FrameKind, encodeFrame } from '../wire/frame.ts';
import type { SlotBuffer } from '../mux/slot-buffer.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { StreamError } from './errors.ts';

export { Offer };

/** Where a sender's frames go. */
export interface SenderPort {
  /** Hand one frame over (`FrameKind` + raw value). Never throws. */
  offer(kind: number, value: unknown): Offer;
  /** Resolves when the producer may send again; rejects when the stream closed. */
  waitWritable(): Promise<void>;
  /** True while the producer must wait before its next frame. */
  readonly paused: boolean;
  /** The producer leaves without a terminal. */
  depart(): void;
  /** Why the port closed, once it has. */
  readonly closeError: LanemuxError | null;
  /** Data records the port passes on now without withholding one (credit and room); 0 while it must wait. */
  readonly room: number;
  /**
   * Call `fn` once, when `room` may have grown; a later call replaces it. Never for a closed port:
   * the sender learns of the close otherwise (its cancel), and a slot's close may be a lost link.
   */
  notifyRoom(fn: () => void): void;
  /** Records handed over and still waiting here (for credit, room or a link). */
  readonly withheld: number;
  /**
   * Pause the producer once more than `depth` records wait for credit (a live feed keeps its
   * records itself, live-feed.ts). Absent: the port's own bound (its buffer, its socket) applies.
   */
  holdBack?(depth: number): void;
}

/** A producer's frames into a mux slot. Strings and bytes are written into the batch by hand. */
export class MuxPort implements SenderPort {
  readonly slot: EgressSlot;
  constructor(slot: EgressSlot) {
    this.slot = slot;
  }
  get paused(): boolean {
    return this.slot.paused;
  }
  get closeError(): LanemuxError | null {
    return this.slot.closed ? this.slot.closeError : null;
  }
  get room(): number {
    return slotRoom(this.slot);
  }
  notifyRoom(fn: () => void): void {
    if (!this.slot.closed) this.slot.roomWaiter = fn;
  }
  get withheld(): number {
    return this.slot.queued;
  }
  offer(kind: number, value: unknown): Offer {
    const slot = this.slot;
    switch (kind) {
      case FrameKind.Item:
        if (typeof value === 'string') return slot.batcher.offer(slot, EgressKind.ItemString, value);
        if (value instanceof Uint8Array) return slot.batcher.offer(slot, EgressKind.ItemBytes, value);
        return slot.batcher.offer(slot, EgressKind.Body, encodeItemBody(value));
      case FrameKind.SenderError:
        return slot.batcher.offer(slot, EgressKind.Body, encodeFrame({ kind: 'SenderError', message: String(value) }));
      case FrameKind.Heartbeat:
        slot.batcher.heartbeat(slot);
        return Offer.Ok;
      case FrameKind.Finalized:
        return slot.batcher.offer(slot, EgressKind.Terminal, FRAME_FINALIZED);
      case FrameKind.Detached:
        return slot.batcher.offer(slot, EgressKind.Terminal, FRAME_DETACHED);
      case FrameKind.Dropped:
        return slot.batcher.offer(slot, EgressKind.Terminal, FRAME_DROPPED);
      default:
        return slot.batcher.offer(
          slot,
          EgressKind.Terminal,
          encodeFrame({ kind: 'TransportError', message: String(value) }),
        );
    }
  }
  waitWritable(): Promise<void> {
    return this.slot.waitWritable();
  }
  depart(): void {
    this.slot.batcher.depart(this.slot);
  }
  holdBack(depth: number): void {
    this.slot.withholdDepth = depth;
  }
}

/** What a mux slot passes on now: its credit, while nothing is withheld and the inlet is open. */
export function slotRoom(slot: EgressSlot): number {
  return slot.closed || slot.paused || slot.queued > 0 ? 0 : slot.ledger.dataAvailable;
}

/**
 * A same-worker sender writes straight into the anchor's local buffer: no transport, no encoding.
 * The buffer is bounded (the reference's anchor channel depth, 256): a full buffer makes `send` wait.
 */
export class LocalPort implements SenderPort {
  readonly #buffer: SlotBuffer;
  #waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  #pending: Array<[number, unknown]> = [];
  closeError: LanemuxError | null = null;
  /** Called when a terminal is handed over (retirement: Sent). */
  onTerminal: (() => void) | null = null;
  /** Called when the consumer went away first (retirement: Discarded). */
  onFailed: (() => void) | null = null;
  /** Called when the consumer asks the producer to stop (same-worker `requestStop`). */
  onStop: (() => void) | null = null;
  #roomWaiter: (() => void) | null = null;

  constructor(buffer: SlotBuffer) {
    this.#buffer = buffer;
  }
  get paused(): boolean {
    return this.#pending.length > 0;
  }
  get room(): number {
    return this.closeError !== null || this.#pending.length > 0 ? 0 : this.#buffer.capacity - this.#buffer.length;
  }
  notifyRoom(fn: () => void): void {
    if (this.closeError === null) this.#roomWaiter = fn;
  }
  get withheld(): number {
    return this.#pending.length;
  }
  #wakeRoom(): void {
    const w = this.#roomWaiter;
    if (w === null) return;
    this.#roomWaiter = null;
    w();
  }
  offer(kind: number, value: unknown): Offer {
    if (this.closeError !== null) return Offer.Closed;
    if (kind === FrameKind.Heartbeat) return Offer.Ok; // no watchdog reads a same-worker stream
    if (kind >= FrameKind.Finalized) this.onTerminal?.();
    if (this.#pending.length === 0 && this.#buffer.push(kind, value, 0)) return Offer.Ok;
    // A producer that does not wait for `send()` gets a hard cap (the anchor channel's depth again).
    if (this.#pending.length >= this.#buffer.capacity && kind < FrameKind.Finalized) return Offer.Refused;
    // Full: keep this one frame aside and make the producer wait (the inlet's one-record overshoot).
    this.#pending.push([kind, value]);
    return Offer.Wait;
  }
  /** The consumer took a frame: move a pending one in and wake the producer. */
  drained(): void {
    while (this.#pending.length > 0) {
      const [k, v] = this.#pending[0]!;
      if (!this.#buffer.push(k, v, 0)) return;
      this.#pending.shift();
    }
    if (this.#roomWaiter !== null) this.#wakeRoom();
    const w = this.#waiters;
    this.#waiters = [];
    for (const x of w) x.resolve();
  }
  waitWritable(): Promise<void> {
    if (this.closeError !== null) return Promise.reject(this.closeError);
    if (this.#pending.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }
  depart(): void {
    if (this.closeError === null) this.#buffer.pushForced(FrameKind.Dropped, undefined);
  }
  /** The consumer went away: fail the producer. */
  fail(error: LanemuxError): void {
    if (this.closeError !== null) return;
    this.closeError = error;
    this.onFailed?.();
    this.#pending = [];
    this.#roomWaiter = null;
    const w = this.#waiters;
    this.#waiters = [];
    for (const x of w) x.reject(error);
  }
}

/** Options of {@link PerStreamPort}. */
export interface PerStreamPortOptions {
  /** The clock of the idle heartbeats (the node's runtime). Without it the port never heartbeats. */
  readonly runtime?: Runtime;
  /** `heartbeat_interval_ms` of the attach answer; 0 (the default) sends no heartbeats. */
  readonly heartbeatMs?: number;
  /** The consumer asked the producer to stop (its `requestStop`). */
  readonly onStop?: () => void;
}

/**
 * A producer's frames over a dedicated per-stream connection (the legacy path): one write per
 * frame, back-pressure from the socket. While idle it heartbeats at the consumer's interval, so the
 * consumer's watchdog (docs/protocol.md §9) keeps a quiet stream: one timer per connection, and a frame
 * only sets a flag.
 */
export class PerStreamPort implements SenderPort {
  readonly #conn: import('./per-stream.ts').PerStreamConnection;
  #paused: Promise<void> | null = null;
  closeError: LanemuxError | null = null;
  #ended = false;
  #bytesWhilePaused = 0;
  readonly #runtime: Runtime | null;
  readonly #heartbeatMs: number;
  #timer: TimerHandle | null = null;
  /** A frame went out since the last heartbeat tick. */
  #active = false;
  #roomWaiter: (() => void) | null = null;

  constructor(conn: import('./per-stream.ts').PerStreamConnection, options: PerStreamPortOptions = {}) {
    this.#conn = conn;
    conn.onClose((error) => {
      this.#stopHeartbeats();
      if (this.closeError === null && !this.#ended)
        this.closeError = error ?? new StreamErrorLike('the per-stream connection closed');
      this.#roomWaiter = null;
    });
    const onStop = options.onStop;
    if (onStop !== undefined) conn.onStop?.(onStop);
    const ms = options.heartbeatMs ?? 0;
    this.#runtime = options.runtime ?? null;
    this.#heartbeatMs = ms > 0 && this.#runtime !== null ? ms : 0;
    if (this.#heartbeatMs > 0) this.#timer = this.#runtime!.setTimer(this.#tick, this.#heartbeatMs);
  }
  get paused(): boolean {
    return this.#paused !== null;
  }
  /** The socket's back-pressure is the only bound: 1 while it takes frames (look again after each). */
  get room(): number {
    return this.closeError !== null || this.#ended || this.#paused !== null ? 0 : 1;
  }
  notifyRoom(fn: () => void): void {
    if (this.closeError !== null || this.#ended) return;
    if (this.#paused === null) fn();
    else this.#roomWaiter = fn;
  }
  get withheld(): number {
    return 0;
  }
  #wakeRoom(): void {
    const w = this.#roomWaiter;
    if (w === null) return;
    this.#roomWaiter = null;
    w();
  }
  offer(kind: number, value: unknown): Offer {
    if (this.closeError !== null || this.#ended) return Offer.Closed;
    // A producer that does not wait for `send()` while the socket is draining gets a hard cap.
    if (this.#paused !== null && kind < FrameKind.Finalized && this.#bytesWhilePaused >= PER_STREAM_PAUSED_CAP)
      return Offer.Refused;
    this.#active = true;
    const body = encodeFrame(frameOf(kind, value));
    if (this.#paused !== null) this.#bytesWhilePaused += body.byteLength;
    const r = this.#conn.write(body);
    if (kind >= FrameKind.Finalized) {
      this.#ended = true;
      this.#stopHeartbeats();
      this.#conn.end();
      return Offer.Ok;
    }
    if (r === true) return Offer.Ok;
    const p = r.then(
      () => {
        if (this.#paused === p) {
          this.#paused = null;
          this.#bytesWhilePaused = 0;
          this.#wakeRoom();
        }
      },
      (e: unknown) => {
        this.#paused = null;
        this.closeError ??= e instanceof Error ? (e as LanemuxError) : new StreamErrorLike(String(e));
        this.#roomWaiter = null;
        throw this.closeError;
      },
    );
    this.#paused = p;
    // `trySend` drops this promise: a later rejection must not be an unhandled rejection.
    p.catch(() => {});
    return Offer.Wait;
  }
  waitWritable(): Promise<void> {
    if (this.closeError !== null) return Promise.reject(this.closeError);
    return this.#paused ?? Promise.resolve();
  }
  depart(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#stopHeartbeats();
    this.#conn.destroy();
  }

  /**
   * One heartbeat window: a heartbeat only if nothing went out in it, and never behind a full
   * socket (it would wait behind the queue; the consumer excuses a producer it holds back).
   */
  readonly #tick = (): void => {
    this.#timer = null;
    if (this.#ended || this.closeError !== null) return;
    if (!this.#active && this.#paused === null) this.offer(FrameKind.Heartbeat, undefined);
    this.#active = false;
    if (!this.#ended && this.closeError === null) this.#timer = this.#runtime!.setTimer(this.#tick, this.#heartbeatMs);
  };

  #stopHeartbeats(): void {
    if (this.#timer === null) return;
    this.#runtime!.clearTimer(this.#timer);
    this.#timer = null;
  }
}

/** Bytes a per-stream producer may write past a full socket buffer without waiting. */
const PER_STREAM_PAUSED_CAP = 1 << 20;

function frameOf(kind: number, value: unknown): import('../wire/frame.ts').StreamFrame {
  switch (kind) {
    case FrameKind.Item:
      return { kind: 'Item', value };
    case FrameKind.SenderError:
      return { kind: 'SenderError', message: String(value) };
    case FrameKind.Heartbeat:
      return { kind: 'Heartbeat' };
    case FrameKind.Finalized:
      return { kind: 'Finalized' };
    case FrameKind.Detached:
      return { kind: 'Detached' };
    case FrameKind.Dropped:
      return { kind: 'Dropped' };
    default:
      return { kind: 'TransportError', message: String(value) };
  }
}

class StreamErrorLike extends StreamError {
  constructor(message: string) {
    super('ERR_SENDER_DROPPED', message, { retryable: true });
  }
}
