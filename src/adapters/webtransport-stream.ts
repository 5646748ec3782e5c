/**
 * One lane over one WebTransport bidirectional stream, shared by the client (`webtransport.ts`) and
 * the Deno server (`deno-webtransport.ts`): a {@link Connection} on a WHATWG `{ readable, writable }`
 * pair, plus the per-session bookkeeping that decides when a session may close.
 *
 * Designed around Deno 2.9.6's WebTransport (denoland/deno#36822) so it never depends on what Deno
 * does not send:
 * - **Self-framed**: every message is `[u32 length BE][message]` (`transport/frame.ts`), limits checked before
 *   allocation. A zero-length frame is the end-of-stream marker (`END`), sent instead of a QUIC FIN
 *   (Deno never sends one) and instead of relying on close codes (Deno sends none). A lanemux message
 *   is never empty, so the marker is unambiguous. `writer.close()` is never called (≈ 27 ms per call in
 *   Chromium, and no FIN from Deno anyway).
 * - **Closing handshake**: a graceful close writes `END` and keeps reading (discarding; a paused lane
 *   stays paused) until the peer's `END`; a peer that receives `END` answers with its own at once. A
 *   stream is *done* when both directions have ended; a session whose streams are all done is closed at
 *   once by each side itself (Deno 2.9.6 never sees a session closed by Chromium), so nothing either
 *   side still had to read is lost to the session reset. A peer that never answers gets `closeGraceMs`.
 * - **Admission**: the bytes handed to `writer.write()` whose promise has not resolved yet are the
 *   socket buffer of the shared {@link AdmissionGate}; each resolved write drains the gate. A write
 *   resolves when the stream's sink (QUIC flow control, the peer's reading) has taken the chunk, so a
 *   stalled reader makes admission wait and the queue stays bounded by `maxPendingBytes`.
 * - **Batching**: sends of one task are coalesced (microtask) into one `writer.write()`, one crossing
 *   into the QUIC stack per burst instead of one per message.
 *
 * @packageDocumentation
 */
import type { UpgradeRequest } from '../transport/auth.ts';
import type { LanemuxError } from '../errors.ts';
import { AdmissionGate, type AdmissionLimits } from '../transport/admission.ts';
import { TransportError, asTransportError, describeThrown } from '../transport/errors.ts';
import { FRAME_PREFIX_BYTES, FrameDecoder, writeFrame } from '../transport/frame.ts';
import type { FramePolicy } from '../transport/frame-pool.ts';
import { encodeGoaway } from '../transport/hello.ts';
import type { Admission, CloseMode, Connection, ConnectionReceiver } from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';

/** A WebTransport bidirectional stream as both the standard API and Deno expose it. */
export interface WtBidiStream {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
}

/** The part of a WebTransport session that the lane bookkeeping needs. */
export interface WtSessionLike {
  readonly closed: Promise<unknown>;
  close(info?: { closeCode?: number; reason?: string }): void;
}

/** The streams (lanes) of one WebTransport session, and when to close it. */
export class WtSessionLanes<S extends WtSessionLike = WtSessionLike> {
  readonly label: string;
  /** The node's clock and timers: the session's grace timer and its lanes' frame deadlines. */
  readonly runtime: Runtime;
  readonly #session: S;
  readonly #graceMs: number;
  readonly #conns = new Set<WtStreamConn>();
  readonly #onRetired: (() => void) | undefined;
  readonly closedPromise: Promise<void>;
  #retired = false;
  #opening = 0;
  #graceTimer: TimerHandle | undefined;

  constructor(session: S, label: string, graceMs: number, runtime: Runtime, onRetired?: () => void) {
    this.#session = session;
    this.label = label;
    this.runtime = runtime;
    this.#graceMs = graceMs;
    this.#onRetired = onRetired;
    this.closedPromise = session.closed.then(
      () => this.#lost(undefined),
      (e: unknown) => this.#lost(e),
    );
  }

  /** The session itself. */
  get session(): S {
    return this.#session;
  }

  /** False once the session is closing or closed: no new lane may use it. */
  get usable(): boolean {
    return !this.#retired;
  }

  /** Streams this session has carried (they stay counted until the session closes). */
  get size(): number {
    return this.#conns.size;
  }

  /** A stream is being opened for a new lane: the session must not close meanwhile. */
  opening(delta: 1 | -1): void {
    this.#opening += delta;
    if (delta < 0) this.update();
  }

  add(conn: WtStreamConn): void {
    this.#conns.add(conn);
    if (this.#graceTimer !== undefined) {
      this.runtime.clearTimer(this.#graceTimer);
      this.#graceTimer = undefined;
    }
  }

  /** A lane changed state: close the session once nothing needs it. */
  update(): void {
    if (this.#retired || this.#opening > 0) return;
    let allDone = true;
    for (const c of this.#conns) {
      if (!c.localClosed) return;
      if (!c.done) allDone = false;
    }
    // A fresh session waits for its first stream (the server's idle timer bounds that wait).
    if (this.#conns.size === 0) return;
    if (allDone) this.close();
    else this.#graceTimer ??= this.runtime.setTimer(() => this.close(), this.#graceMs);
  }

  /** Close the session now (its lanes see the session gone). */
  close(info: { closeCode?: number; reason?: string } = { closeCode: 0, reason: 'done' }): void {
    if (this.#retired) return;
    this.#retire();
    try {
      this.#session.close(info);
    } catch {
      // Already closed by the peer or the runtime.
    }
    this.#failAll(
      new TransportError('ERR_PEER_GONE', `webtransport session ${this.label} closed`, { retryable: true }),
    );
  }

  #lost(cause: unknown): void {
    const detail = cause === undefined ? '' : `: ${describeThrown(cause)}`;
    if (!this.#retired) this.#retire();
    this.#failAll(
      new TransportError('ERR_PEER_GONE', `webtransport session ${this.label} closed${detail}`, {
        retryable: true,
        cause,
      }),
    );
  }

  #retire(): void {
    this.#retired = true;
    if (this.#graceTimer !== undefined) this.runtime.clearTimer(this.#graceTimer);
    this.#graceTimer = undefined;
    this.#onRetired?.();
  }

  #failAll(error: LanemuxError): void {
    const conns = [...this.#conns];
    this.#conns.clear();
    for (const c of conns) c.sessionLost(error);
  }
}

/** One lane connection on one bidirectional stream. */
export class WtStreamConn implements Connection {
  readonly remote: string;
  /** Server side: the session's request (for `authenticate`). */
  request: UpgradeRequest | undefined;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #decoder: FrameDecoder;
  readonly #gate: AdmissionGate;
  readonly #lanes: WtSessionLanes;
  #receiver: ConnectionReceiver | undefined;
  /** The receiver has been told (close, END, loss): the Connection contract's "closed". */
  #closed = false;
  /** We wrote END (or gave up writing). */
  localClosed = false;
  /** The peer's END arrived (or reading is over for another reason). */
  #remoteEnded = false;
  #paused = false;
  #wake: (() => void) | undefined;
  // Frames of this task, written together in a microtask.
  #batch: Uint8Array[] = [];
  #batchBytes = 0;
  #flushQueued = false;
  /** Bytes handed to the writer (or batched) whose write has not resolved. */
  #inflight = 0;

  constructor(
    stream: WtBidiStream,
    remote: string,
    frameLimit: number,
    limits: AdmissionLimits,
    lanes: WtSessionLanes,
    framePolicy?: FramePolicy,
  ) {
    this.remote = remote;
    this.#lanes = lanes;
    this.#reader = stream.readable.getReader();
    this.#writer = stream.writable.getWriter();
    // Unhandled-rejection guards: the session may die with these promises pending.
    this.#writer.closed.catch(() => {});
    this.#reader.closed.catch(() => {});
    // Incomplete frames count against the node's pool, and a large one has a deadline (frame-pool.ts).
    this.#decoder = new FrameDecoder(frameLimit, remote, {
      policy: framePolicy,
      onDeadline: (error) => this.#refuse(error),
      runtime: lanes.runtime,
    });
    this.#gate = new AdmissionGate({ buffered: () => this.#inflight, write: (f) => this.#enqueue(f) }, limits, remote);
    lanes.add(this);
  }

  /** Called once after the receiver learns the connection closed (a reconnecting dial watches this). */
  onClosed: ((error: LanemuxError) => void) | undefined;

  /** Why the connection closed, kept so that a closed-before-start() conn still reports it. */
  #closedWith: LanemuxError | undefined;

  #report(error: LanemuxError): void {
    this.#closedWith = error;
    this.#receiver?.closed(error);
    this.onClosed?.(error);
  }

  /** Both directions ended: the session no longer needs this stream. */
  get done(): boolean {
    return this.localClosed && this.#remoteEnded;
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    // Lost between stream creation and hand-over (session closed meanwhile): tell the new owner.
    if (this.#closedWith !== undefined) {
      this.#report(this.#closedWith);
      return;
    }
    void this.#pump();
  }

  setFrameLimit(bytes: number): void {
    this.#decoder.limit = bytes;
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed)
      return Promise.reject(
        new TransportError('ERR_PEER_GONE', `webtransport stream to ${this.remote} is closed`, { retryable: true }),
      );
    const len = head.byteLength + (body?.byteLength ?? 0);
    if (len === 0)
      return Promise.reject(
        new TransportError(
          'ERR_SEND_REFUSED',
          'an empty message cannot be sent: a zero-length frame ends a WebTransport lane stream',
        ),
      );
    const frame = new Uint8Array(FRAME_PREFIX_BYTES + len);
    writeFrame(frame, head, body);
    return this.#gate.offer(frame);
  }

  bufferedAmount(): number {
    return this.#inflight + this.#gate.pendingBytes;
  }

  pause(): boolean {
    this.#paused = true;
    return true;
  }

  resume(): void {
    this.#paused = false;
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#gate.fail(reason);
    if (mode === 'abort') {
      // Drop what is not written yet; END still goes so the peer's stream ends now, not at session close.
      this.#inflight -= this.#batchBytes;
      this.#batch = [];
      this.#batchBytes = 0;
      this.#remoteEnded = true;
    }
    this.#endLocal();
    // A paused lane stays paused: what the peer still sends waits in QUIC flow control, as on a paused
    // TCP socket, so its pending admissions fail when it sees our END instead of being admitted now.
    // The peer closes the session once it has our END, which ends this stream too.
    if (mode === 'abort') this.resume();
    this.#report(reason);
    this.#lanes.update();
  }

  /** The session is gone (closed by either side, or failed). */
  sessionLost(error: LanemuxError): void {
    this.localClosed = true;
    this.#remoteEnded = true;
    this.#batch = [];
    this.#batchBytes = 0;
    this.#decoder.stop();
    this.resume();
    if (this.#closed) return;
    this.#closed = true;
    this.#gate.fail(error);
    this.#report(error);
  }

  // ------------------------------------------------------------------------------ writing

  #enqueue(frame: Uint8Array): void {
    this.#batch.push(frame);
    this.#batchBytes += frame.byteLength;
    this.#inflight += frame.byteLength;
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(this.#flush);
    }
  }

  readonly #flush = (): void => {
    this.#flushQueued = false;
    const batch = this.#batch;
    if (batch.length === 0) return;
    const bytes = this.#batchBytes;
    this.#batch = [];
    this.#batchBytes = 0;
    let chunk: Uint8Array;
    if (batch.length === 1) chunk = batch[0] as Uint8Array;
    else {
      chunk = new Uint8Array(bytes);
      let off = 0;
      for (const f of batch) {
        chunk.set(f, off);
        off += f.byteLength;
      }
    }
    this.#writer.write(chunk).then(
      () => {
        this.#inflight -= bytes;
        this.#gate.drain();
      },
      (e: unknown) => {
        this.#inflight -= bytes;
        this.#broken(e);
      },
    );
  };

  /** Write END after what is batched (once). */
  #endLocal(): void {
    if (this.localClosed) return;
    this.localClosed = true;
    // The END marker, a frame of length 0; a fresh buffer, since a runtime may transfer what it writes.
    this.#enqueue(new Uint8Array(FRAME_PREFIX_BYTES));
    this.#flush();
  }

  /** A write failed: the stream (or session) is broken; nothing more can be exchanged on it. */
  #broken(cause: unknown): void {
    this.localClosed = true;
    this.#remoteEnded = true;
    this.#decoder.stop();
    this.resume();
    if (!this.#closed) {
      this.#closed = true;
      const error = asTransportError('ERR_PEER_GONE', `webtransport stream to ${this.remote} failed`, cause);
      this.#gate.fail(error);
      this.#report(error);
    }
    this.#lanes.update();
  }

  // ------------------------------------------------------------------------------ reading

  async #pump(): Promise<void> {
    const reader = this.#reader;
    for (;;) {
      if (this.#paused) await new Promise<void>((r) => (this.#wake = r));
      if (this.#remoteEnded) break;
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        this.#readFailed(e);
        break;
      }
      if (r.done) {
        // A FIN without our END marker (a non-Deno peer, or the runtime ending the stream): the lane is over.
        this.#readFailed(new Error('stream ended without an END frame'));
        break;
      }
      // A read that was in flight when pause() came: hold its bytes until resume().
      if (this.#paused) await new Promise<void>((res) => (this.#wake = res));
      if (this.#remoteEnded) break;
      const error = this.#decoder.push(r.value, this.#onFrame);
      if (error !== undefined) this.#refuse(error);
    }
    try {
      reader.releaseLock();
    } catch {
      // A pending read on a dead stream.
    }
  }

  readonly #onFrame = (message: Uint8Array): void => {
    if (message.byteLength === 0) {
      this.#remoteEnd();
      return;
    }
    // After our own close we only wait for the peer's END.
    if (!this.#closed) this.#receiver?.message(message);
  };

  /** The peer's END: answer with ours, and the lane is over. */
  #remoteEnd(): void {
    this.#remoteEnded = true;
    this.#decoder.stop();
    this.#endLocal();
    if (!this.#closed) {
      this.#closed = true;
      const error = new TransportError('ERR_PEER_GONE', `webtransport stream to ${this.remote} closed by peer`, {
        retryable: true,
      });
      this.#gate.fail(error);
      this.#report(error);
    }
    this.#lanes.update();
  }

  #readFailed(cause: unknown): void {
    if (this.#remoteEnded) return;
    this.#remoteEnded = true;
    this.#decoder.stop();
    if (!this.#closed) {
      this.#closed = true;
      const error = asTransportError('ERR_PEER_GONE', `webtransport stream to ${this.remote} failed`, cause);
      this.#gate.fail(error);
      this.#endLocal();
      this.#report(error);
    }
    this.#lanes.update();
  }

  /** The peer broke framing: tell it why (GOAWAY before END), then close. */
  #refuse(error: LanemuxError): void {
    // The decoder has stopped: later bytes are ignored while the peer reads our GOAWAY and END and
    // answers by closing (or the grace period runs out). Closing the session now could reset the
    // stream before the GOAWAY is read.
    if (this.#closed) return;
    const goaway = encodeGoaway(error);
    const frame = new Uint8Array(FRAME_PREFIX_BYTES + goaway.byteLength);
    writeFrame(frame, goaway, undefined);
    this.#enqueue(frame);
    this.close(error, 'graceful');
  }
}
