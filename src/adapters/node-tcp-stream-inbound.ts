/**
 * The consumer side of the `tcp-stream` transport: one accepted connection, its preface, then its
 * frames into the sink the listener handed out; the stop request back to the producer.
 *
 * @packageDocumentation
 */
import type net from 'node:net';
import type { LanemuxError } from '../errors.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { FrameDecoder } from '../transport/frame.ts';
import type { PerStreamSink } from '../transport/per-stream-port.ts';
import type { ResolvedTcpStreamOptions } from './node-tcp-stream-options.ts';
import { peerOf, reset } from './node-tcp-stream-socket.ts';
import { STOP_FRAME, TCP_STREAM_PREFACE_BYTES } from './node-tcp-stream-wire.ts';
import { TcpStreamError } from './tcp-stream-errors.ts';

/** What an accepted connection needs from its transport. */
export interface InboundOwner {
  readonly options: ResolvedTcpStreamOptions;
  /** The runtime the preface deadline runs on. */
  readonly runtime: Runtime;
  forgetInbound(conn: Inbound): void;
}

/**
 * Consumer side of one accepted connection: preface, then frames into the sink. When the sink
 * says stop, the unread rest of the current chunk is kept aside and the socket paused, so no frame
 * is ever offered to a full sink (the node's sink would drop it).
 */
export class Inbound {
  readonly #socket: net.Socket;
  readonly #owner: InboundOwner;
  readonly #accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null;
  readonly #maxFrameBytes: number;
  readonly #preface = Buffer.alloc(TCP_STREAM_PREFACE_BYTES);
  #prefaceFill = 0;
  #prefaceTimer: TimerHandle | null;
  #sink: PerStreamSink | null = null;
  /** Frames after the preface; it holds what arrives while the sink has paused us. */
  readonly #decoder: FrameDecoder;
  /** The producer's FIN arrived (possibly while we still hold stashed frames). */
  #eof = false;
  #socketClosed = false;
  #socketError: Error | undefined;
  /** The sink has been ended (or the connection refused): nothing more is delivered. */
  #finished = false;
  /** The stop request went out (once per connection). */
  #stopSent = false;

  constructor(
    socket: net.Socket,
    owner: InboundOwner,
    accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null,
  ) {
    this.#socket = socket;
    this.#owner = owner;
    this.#accept = accept;
    this.#maxFrameBytes = owner.options.maxFrameBytes;
    // Copies, not views: a consumer may hold a small item for long, and a view would pin the whole chunk.
    this.#decoder = new FrameDecoder(this.#maxFrameBytes, `tcp-stream peer ${peerOf(socket)}`, {
      copy: true,
      policy: owner.options.framePolicy,
      onDeadline: (e) => this.#fail(e),
      runtime: owner.runtime,
    });
    const timeoutMs = owner.options.prefaceTimeoutMs;
    this.#prefaceTimer = owner.runtime.setTimer(() => {
      this.#fail(
        new TcpStreamError('ERR_PREFACE', `no tcp-stream preface from ${peerOf(socket)} within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => {
      this.#eof = true;
      if (!this.#decoder.paused) this.#endOfInput();
    });
    socket.on('error', (e: Error) => {
      this.#socketError ??= e;
    });
    socket.on('close', () => this.#onClose());
  }

  /** Tear down from the transport side (close()). */
  abort(error: LanemuxError): void {
    this.#fail(error);
  }

  #onData(chunk: Uint8Array): void {
    if (this.#finished) return;
    let rest = chunk;
    if (this.#sink === null) {
      const n = Math.min(TCP_STREAM_PREFACE_BYTES - this.#prefaceFill, chunk.byteLength);
      this.#preface.set(chunk.subarray(0, n), this.#prefaceFill);
      this.#prefaceFill += n;
      if (this.#prefaceFill < TCP_STREAM_PREFACE_BYTES || !this.#onPreface()) return;
      rest = chunk.subarray(n);
      if (rest.byteLength === 0) return;
    }
    this.#check(this.#decoder.push(rest, this.#deliver));
    // Data that raced a pause is held by the decoder, in order; keep the socket paused meanwhile.
    if (this.#decoder.paused && !this.#finished) this.#socket.pause();
  }

  #check(error: LanemuxError | undefined): void {
    if (error === undefined) return;
    // The decoder's codes keep their meaning on the per-stream path.
    const code = error.code === 'ERR_FRAME_TOO_LARGE' || error.code === 'ERR_FRAME_DEADLINE' ? error.code : undefined;
    this.#fail(
      code === undefined ? error : new TcpStreamError(code, `${error.message} (tcp-stream)`, { cause: error }),
    );
  }

  /** The preface is complete: ask the listener. False when refused (the socket is reset). */
  #onPreface(): boolean {
    if (this.#prefaceTimer !== null) {
      this.#owner.runtime.clearTimer(this.#prefaceTimer);
      this.#prefaceTimer = null;
    }
    const anchorId = this.#preface.readBigUInt64BE(0);
    const sessionId = this.#preface.readBigUInt64BE(8);
    let sink: PerStreamSink | null;
    let cause: unknown;
    try {
      sink = this.#accept(anchorId, sessionId);
    } catch (e) {
      sink = null;
      cause = e;
    }
    if (sink === null) {
      const id = `anchor 0x${anchorId.toString(16)} session 0x${sessionId.toString(16)}`;
      this.#fail(
        new TcpStreamError('ERR_REFUSED', `tcp-stream connection from ${peerOf(this.#socket)} refused: unknown ${id}`, {
          cause,
        }),
      );
      return false;
    }
    this.#sink = sink;
    sink.resume = this.#resume;
    sink.abort = this.#abort;
    sink.stop = this.#stop;
    return true;
  }

  /** One frame to the sink; false (pause) when it is full. */
  readonly #deliver = (body: Uint8Array): boolean => {
    if (this.#finished) return false;
    try {
      return this.#sink!.frame(body);
    } catch (cause) {
      this.#fail(
        new TcpStreamError('ERR_MALFORMED_FRAME', `the sink threw on a tcp-stream frame from ${peerOf(this.#socket)}`, {
          cause,
        }),
      );
      return false;
    }
  };

  /** Installed as `sink.abort`: the consumer gave up on the stream; the producer sees a reset. */
  readonly #abort = (error: LanemuxError): void => {
    this.#fail(error);
  };

  /**
   * Installed as `sink.stop`: the consumer's stop request, written once. Not after the producer's
   * FIN (Node ended our side with it) nor after the end: the stream is over then anyway.
   */
  readonly #stop = (): void => {
    if (this.#finished || this.#stopSent) return;
    this.#stopSent = true;
    const s = this.#socket;
    if (!s.destroyed && !s.writableEnded) s.write(STOP_FRAME);
  };

  /** Installed as `sink.resume`: called often (after every take), so cheap when not paused. */
  readonly #resume = (): void => {
    if (!this.#decoder.paused || this.#finished) return;
    this.#check(this.#decoder.resume(this.#deliver));
    if (this.#decoder.paused || this.#finished) return;
    if (this.#eof) this.#endOfInput();
    else this.#socket.resume();
  };

  /** The FIN arrived and every byte before it was parsed. */
  #endOfInput(): void {
    if (this.#finished) return;
    if (this.#sink === null) {
      this.#fail(
        new TcpStreamError(
          'ERR_PREFACE',
          `tcp-stream connection from ${peerOf(this.#socket)} ended before its preface`,
        ),
      );
    } else if (this.#decoder.midFrame) {
      this.#fail(
        new TcpStreamError(
          'ERR_MALFORMED_FRAME',
          `tcp-stream connection from ${peerOf(this.#socket)} ended inside a frame`,
        ),
      );
    } else {
      this.#finish(null);
    }
  }

  #onClose(): void {
    this.#socketClosed = true;
    if (this.#prefaceTimer !== null) {
      this.#owner.runtime.clearTimer(this.#prefaceTimer);
      this.#prefaceTimer = null;
    }
    // A clean FIN while we still hold stashed frames: the sink gets them (and its end) on resume.
    if (!this.#finished && !(this.#eof && this.#decoder.paused && this.#socketError === undefined)) {
      const cause = this.#socketError;
      const detail = cause === undefined ? 'closed before the stream ended' : `failed: ${cause.message}`;
      this.#finish(
        new TcpStreamError('ERR_SENDER_DROPPED', `tcp-stream connection from ${peerOf(this.#socket)} ${detail}`, {
          cause,
          retryable: true,
        }),
      );
    }
    this.#maybeForget();
  }

  #fail(error: LanemuxError): void {
    this.#finish(error);
    reset(this.#socket);
  }

  #finish(error: LanemuxError | null): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#decoder.stop();
    if (this.#prefaceTimer !== null) {
      this.#owner.runtime.clearTimer(this.#prefaceTimer);
      this.#prefaceTimer = null;
    }
    const sink = this.#sink;
    if (sink !== null) {
      sink.resume = null;
      sink.abort = null;
      sink.stop = null;
      try {
        sink.end(error);
      } catch {
        // The sink's own failure is its business; the connection is over either way.
      }
    }
    this.#maybeForget();
  }

  #maybeForget(): void {
    if (this.#finished && this.#socketClosed) this.#owner.forgetInbound(this);
  }
}
