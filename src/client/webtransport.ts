/**
 * The WebTransport carrier: one session per carrier, ONE bidirectional stream (the page's one lane),
 * on the standard `WebTransport` API (browsers, Deno). `https://host:port/path` URLs, such as a Deno
 * server's (`webTransportServerTransport`).
 *
 * The stream speaks exactly what the node's adapter speaks (src/adapters/webtransport-stream.ts says
 * why; Deno's WebTransport sends no FIN and no close codes):
 * - every message is `[u32 length BE][message]`; the length is checked before anything is allocated
 *   (a frame over `maxMessageSize` plus a margin is refused: skipped unread, GOAWAY, close);
 * - a zero-length frame is the END marker, sent instead of a FIN. Closing writes END and keeps
 *   reading (discarding) until the server's END, then closes the session; a server's END is answered
 *   with ours at once. A server that never answers gets `closeGraceMs`;
 * - the sends of one task are written with one `writer.write()`; `buffered` counts the bytes whose
 *   write has not resolved, so a server that stops reading shows as a growing buffer.
 */
import { ConfigError } from '../errors.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import { TransportError, describeThrown } from '../transport/errors.ts';
import { encodeGoaway } from '../transport/hello.ts';
import type { Carrier, CarrierFactory } from './carrier.ts';

/** One accepted certificate hash (the same shape as the node adapter's). */
export interface WebTransportHash {
  readonly algorithm: 'sha-256';
  readonly value: BufferSource;
}

/** Accepted certificate hashes: a list, or a function (sync or async) called before every session. */
export type WebTransportHashSource =
  | readonly WebTransportHash[]
  | (() => readonly WebTransportHash[] | Promise<readonly WebTransportHash[]>);

/** The part of the standard `WebTransport` the carrier uses. */
export type WebTransportConstructor = new (
  url: string,
  init: { allowPooling?: boolean; serverCertificateHashes?: WebTransportHash[] },
) => {
  readonly ready: Promise<unknown>;
  readonly closed: Promise<unknown>;
  createBidirectionalStream(): Promise<{
    readonly readable: ReadableStream<Uint8Array>;
    readonly writable: WritableStream<Uint8Array>;
  }>;
  close(info?: { closeCode?: number; reason?: string }): void;
};

/** Options of {@link webTransportCarrier}. */
export interface WebTransportCarrierOptions {
  /**
   * Accept a self-signed certificate with one of these SHA-256 hashes: a list, or a function (sync or
   * async) called before every session, so that a development server restarted with a new certificate
   * is reachable again. Defaults to none: the certificate must be CA-signed.
   */
  readonly serverCertificateHashes?: WebTransportHashSource;
  /** After a close, how long to wait for the server's END before closing the session (ms, 1..600,000). Defaults to 2,000. */
  readonly closeGraceMs?: number;
  /** The WebTransport constructor. Defaults to the global one. */
  readonly WebTransport?: WebTransportConstructor;
}

/** Bytes a frame may exceed `maxMessageSize` by (the envelope around a maximal message). */
const MARGIN = 1024;

const noop = (): void => {};

/**
 * The WebTransport carrier factory. A session that does not give its stream within the factory's
 * `timeoutMs` (`connect`'s `connectTimeoutMs`) is closed and the dial rejects with `ERR_CONNECT`
 * saying why: no `WebTransport` here, a hash function that failed, the handshake refused, or the
 * timeout.
 */
export function webTransportCarrier(options: WebTransportCarrierOptions = {}): CarrierFactory {
  const graceMs = options.closeGraceMs ?? 2000;
  if (!Number.isInteger(graceMs) || graceMs < 1 || graceMs > 600_000)
    throw new ConfigError('closeGraceMs', `closeGraceMs must be an integer in 1..600000, got ${String(graceMs)}`, {
      where: 'webTransportCarrier',
    });
  return async (url, events, { timeoutMs, maxMessageSize, runtime: rt }) => {
    const limit = maxMessageSize + MARGIN;
    const failed = (why: string, cause?: unknown): TransportError =>
      new TransportError('ERR_CONNECT', `could not open WebTransport to ${url}: ${why}`, { retryable: true, cause });
    const Ctor = options.WebTransport ?? (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
    if (Ctor === undefined) throw failed('this runtime has no WebTransport');
    let session: InstanceType<WebTransportConstructor> | undefined;
    let late = false;
    const open = async () => {
      const h = options.serverCertificateHashes;
      const hashes = typeof h === 'function' ? await h() : h;
      if (late) throw failed('late');
      session = new Ctor(url, {
        allowPooling: false,
        ...(hashes && { serverCertificateHashes: hashes.map((x) => ({ algorithm: x.algorithm, value: x.value })) }),
      });
      session.closed.catch(noop);
      await session.ready;
      return session.createBidirectionalStream();
    };
    let timer: TimerHandle | undefined;
    let stream: Awaited<ReturnType<typeof open>>;
    try {
      stream = await Promise.race([
        open(),
        new Promise<never>((_, reject) => {
          timer = rt.setTimer(() => reject(failed(`no session within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch (e) {
      late = true;
      try {
        session?.close();
      } catch {
        // Not open yet: closing is best effort.
      }
      throw e instanceof TransportError ? e : failed(describeThrown(e), e);
    } finally {
      if (timer !== undefined) rt.clearTimer(timer);
    }
    const s = session as NonNullable<typeof session>;
    const reader = stream.readable.getReader();
    const writer = stream.writable.getWriter();
    reader.closed.catch(noop);
    writer.closed.catch(noop);

    /** 0: open; 1: our END written, reading until the server's; 2: done. */
    let state = 0;
    let grace: TimerHandle | undefined;
    let batch: Uint8Array[] = [];
    let batchBytes = 0;
    let inflight = 0;

    const flush = (): void => {
      const n = batch.length;
      if (n === 0) return;
      const bytes = batchBytes;
      let chunk = batch[0] as Uint8Array;
      if (n > 1) {
        chunk = new Uint8Array(bytes);
        let off = 0;
        for (const f of batch) {
          chunk.set(f, off);
          off += f.byteLength;
        }
      }
      batch = [];
      batchBytes = 0;
      writer.write(chunk).then(
        () => (inflight -= bytes),
        (e: unknown) => {
          inflight -= bytes;
          lost(`write failed: ${describeThrown(e)}`);
        },
      );
    };
    const enqueue = (frame: Uint8Array): void => {
      if (batch.length === 0) queueMicrotask(flush);
      batch.push(frame);
      batchBytes += frame.byteLength;
      inflight += frame.byteLength;
    };
    /** Both directions ended (or the session is gone): close the session now. */
    const finish = (): void => {
      state = 2;
      if (grace !== undefined) rt.clearTimer(grace);
      try {
        s.close({ closeCode: 0, reason: 'done' });
      } catch {
        // Already closed.
      }
    };
    const lost = (why: string): void => {
      if (state === 2) return;
      const was = state;
      finish();
      if (was === 0) events.closed(1006, why);
    };

    const carrier: Carrier = {
      send(m) {
        const len = m.byteLength;
        // An empty message would read as END.
        if (state !== 0 || len === 0) return false;
        const f = new Uint8Array(len + 4);
        // Big-endian; a Uint8Array keeps the low byte of each.
        f[0] = len >>> 24;
        f[1] = len >>> 16;
        f[2] = len >>> 8;
        f[3] = len;
        f.set(m, 4);
        enqueue(f);
        return true;
      },
      get buffered() {
        return inflight;
      },
      close() {
        if (state !== 0) return;
        state = 1;
        // END, after what this task sent (a fresh buffer: a runtime may transfer what it writes).
        enqueue(new Uint8Array(4));
        flush();
        grace = rt.setTimer(finish, graceMs);
      },
    };

    // ------------------------------------------------------------------ reading
    let hdr = 0;
    let hdrN = 0;
    let body: Uint8Array | undefined;
    let got = 0;
    /** Bytes of a refused frame still to skip (the stream stays in step, to find the server's END). */
    let skip = 0;
    const deliver = (m: Uint8Array): void => {
      // After our close only the server's END matters.
      if (state === 0) events.message(m);
    };
    const push = (c: Uint8Array): void => {
      let i = 0;
      while (i < c.length && state < 2) {
        if (skip > 0) {
          const n = Math.min(skip, c.length - i);
          skip -= n;
          i += n;
          continue;
        }
        if (body === undefined) {
          hdr = hdr * 256 + (c[i++] as number);
          if (++hdrN < 4) continue;
          const len = hdr;
          hdr = hdrN = 0;
          if (len === 0) {
            // The server's END: answer with ours, and the stream is over.
            const was = state;
            carrier.close(1000, '');
            finish();
            if (was === 0) events.closed(1000, 'the server ended the stream');
          } else if (len > limit) {
            skip = len;
            if (state === 0) {
              const why = `the server sent a ${len}-byte frame (at most ${limit})`;
              carrier.send(encodeGoaway(new TransportError('ERR_FRAME_TOO_LARGE', why)));
              carrier.close(1009, why);
              events.closed(1009, why);
            }
          } else if (c.length - i >= len) {
            deliver(c.subarray(i, i + len));
            i += len;
          } else {
            body = new Uint8Array(len);
            got = 0;
          }
          continue;
        }
        const n = Math.min(body.length - got, c.length - i);
        body.set(c.subarray(i, i + n), got);
        got += n;
        i += n;
        if (got === body.length) {
          const m = body;
          body = undefined;
          deliver(m);
        }
      }
    };
    s.closed.then(
      () => lost('the WebTransport session closed'),
      (e: unknown) => lost(`the WebTransport session closed: ${describeThrown(e)}`),
    );
    void (async () => {
      while (state < 2) {
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await reader.read();
        } catch (e) {
          return lost(`reading failed: ${describeThrown(e)}`);
        }
        if (r.done) return lost('the stream ended without an END frame');
        push(r.value);
      }
    })();
    return carrier;
  };
}
