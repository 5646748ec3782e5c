// WebTransport adapter behaviour that needs no network: what Node users get, the session-ready
// timeout, and the lane stream's framing/END handshake on in-memory WHATWG streams.
import { describe, expect, it } from 'vitest';
import { isLanemuxError, type LanemuxError } from '../../src/errors.ts';
import { webTransportServerTransport as denoServer } from '../../src/adapters/deno-webtransport.ts';
import { webTransportServerTransport as nodeServer } from '../../src/adapters/node-webtransport.ts';
import type { Connection, DialEvents } from '../../src/transport/port.ts';
import {
  webTransportClientTransport,
  type WebTransportConstructor,
  type WebTransportSession,
} from '../../src/adapters/webtransport.ts';
import { WtSessionLanes, WtStreamConn, type WtBidiStream } from '../../src/adapters/webtransport-stream.ts';
import { waitFor } from '../support/wait-for.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';

const PEM = { cert: '-----BEGIN CERTIFICATE-----\n', key: '-----BEGIN PRIVATE KEY-----\n' };

describe('WebTransport on Node', () => {
  it('the server entry Node and Bun resolve to throws ERR_UNSUPPORTED_RUNTIME with what to do instead', () => {
    let thrown: unknown;
    try {
      nodeServer(PEM);
    } catch (e) {
      thrown = e;
    }
    expect(isLanemuxError(thrown, 'ERR_UNSUPPORTED_RUNTIME')).toBe(true);
    expect((thrown as Error).message).toContain("'lanemux/transport/ws-server'");
    expect((thrown as Error).message).toContain('Deno');
    // The Deno adapter itself, loaded on Node by mistake, says the same.
    expect(() => denoServer(PEM)).toThrow(expect.objectContaining({ code: 'ERR_UNSUPPORTED_RUNTIME' }));
  });

  it('the client needs a WebTransport constructor and says where to get one', () => {
    expect(() => webTransportClientTransport()).toThrow(
      expect.objectContaining({
        code: 'ERR_INVALID_CONFIG',
        message: expect.stringContaining('webSocketClientTransport'),
      }),
    );
    expect(() => webTransportClientTransport({ connectTimeoutMs: -1, WebTransport: FakeWt })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    );
  });
});

/** A session whose `ready` never settles, recording close(). */
class FakeWt implements WebTransportSession {
  static last: FakeWt | undefined;
  readonly url: string;
  readonly options: unknown;
  closedWith: unknown;
  readonly ready = new Promise<unknown>(() => {});
  readonly closed = new Promise<unknown>(() => {});
  constructor(url: string, options?: unknown) {
    this.url = url;
    this.options = options;
    FakeWt.last = this;
  }
  createBidirectionalStream(): Promise<WtBidiStream> {
    return new Promise(() => {});
  }
  close(info?: unknown): void {
    this.closedWith = info ?? {};
  }
}

describe('WebTransport client adapter', () => {
  it('a session that never becomes ready is closed, and the dial fails with ERR_CONNECT after connectTimeoutMs', async () => {
    const hash = { algorithm: 'sha-256' as const, value: new Uint8Array(32) };
    const adapter = webTransportClientTransport({
      WebTransport: FakeWt as unknown as WebTransportConstructor,
      connectTimeoutMs: 50,
      serverCertificateHashes: [hash],
    });
    const t0 = performance.now();
    const failed = await new Promise<LanemuxError>((resolve, reject) => {
      const events: DialEvents = { open: () => reject(new Error('opened')), fail: resolve };
      adapter.dial(
        {
          address: 'https://127.0.0.1:1/lanemux',
          lane: 0,
          frameLimit: 4096,
          maxMessageSize: 1 << 20,
          reconnect: false,
          runtime: systemRuntime(),
        },
        events,
      );
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    expect(failed.code).toBe('ERR_CONNECT');
    expect(failed.message).toContain('not ready within 50 ms');
    expect(FakeWt.last?.closedWith).toBeDefined();
    // Hashes go to the constructor, with pooling off as serverCertificateHashes requires.
    expect(FakeWt.last?.options).toEqual({ allowPooling: false, serverCertificateHashes: [hash] });
    await adapter.close();
  });
});

describe('WebTransport client adapter: reconnecting lane-0 dial', () => {
  it('retries a failing session with back-off and gives up after maxRetries with ERR_CONNECT', async () => {
    let attempts = 0;
    class Refused implements WebTransportSession {
      readonly ready = Promise.reject(new Error('connection refused'));
      readonly closed = Promise.reject(new Error('connection refused'));
      constructor() {
        attempts++;
        this.ready.catch(() => {});
        this.closed.catch(() => {});
      }
      createBidirectionalStream(): Promise<WtBidiStream> {
        return Promise.reject(new Error('closed'));
      }
      close(): void {}
    }
    const adapter = webTransportClientTransport({
      WebTransport: Refused,
      maxRetries: 2,
      minReconnectionDelay: 1,
      reconnectionJitter: 0,
      maxReconnectionDelay: 5,
    });
    expect(adapter.reconnects).toBe(true);
    const failed = await new Promise<LanemuxError>((resolve, reject) => {
      adapter.dial(
        {
          address: 'https://127.0.0.1:1/lanemux',
          lane: 0,
          frameLimit: 4096,
          maxMessageSize: 1 << 20,
          reconnect: true,
          runtime: systemRuntime(),
        },
        { open: () => reject(new Error('opened')), fail: resolve },
      );
    });
    expect(attempts).toBe(3);
    expect(failed.code).toBe('ERR_CONNECT');
    expect(failed.message).toContain('connection refused');
    await adapter.close();
  });
});

/** Two lane connections joined by in-memory streams, each on its own one-stream "session". */
function pipePair(limits = { highWaterMark: 16 * 1024, maxPendingBytes: 64 * 1024 }): {
  a: Connection;
  b: Connection;
  sessions: { closed: boolean }[];
  wire: Uint8Array[][];
} {
  const ab = new TransformStream<Uint8Array, Uint8Array>();
  const ba = new TransformStream<Uint8Array, Uint8Array>();
  const wire: Uint8Array[][] = [[], []];
  const tap = (stream: TransformStream<Uint8Array, Uint8Array>, log: Uint8Array[]): ReadableStream<Uint8Array> =>
    stream.readable.pipeThrough(
      new TransformStream({
        transform: (c, ctl) => {
          log.push(c.slice());
          ctl.enqueue(c);
        },
      }),
    );
  const sessions = [0, 1].map(() => {
    let resolve!: () => void;
    const s = {
      closed: false,
      closedP: new Promise<unknown>((r) => (resolve = () => r(undefined))),
      close: () => {
        s.closed = true;
        resolve();
      },
    };
    return s;
  });
  const rt = systemRuntime();
  const la = new WtSessionLanes({ closed: sessions[0]!.closedP, close: () => sessions[0]!.close() }, 'a', 1_000, rt);
  const lb = new WtSessionLanes({ closed: sessions[1]!.closedP, close: () => sessions[1]!.close() }, 'b', 1_000, rt);
  const a = new WtStreamConn({ readable: tap(ba, wire[1]!), writable: ab.writable }, 'a', 1024, limits, la);
  const b = new WtStreamConn({ readable: tap(ab, wire[0]!), writable: ba.writable }, 'b', 1024, limits, lb);
  return { a, b, sessions, wire };
}

describe('WebTransport lane stream', () => {
  it('frames messages, batches a task into one write, and closes with an END handshake before the session closes', async () => {
    const { a, b, sessions, wire } = pipePair();
    const got: string[] = [];
    let aClosed: LanemuxError | undefined;
    let bClosed: LanemuxError | undefined;
    a.start({ message: () => {}, closed: (e) => (aClosed = e) });
    b.start({ message: (m) => got.push(new TextDecoder().decode(m)), closed: (e) => (bClosed = e) });
    for (const w of ['one', 'two', 'three']) expect(a.send(new TextEncoder().encode(w))).toBe(true);
    await waitFor(() => got.length === 3, 1_000, 'three messages');
    expect(got).toEqual(['one', 'two', 'three']);
    // One write for the three sends of one task: [len][one][len][two][len][three].
    expect(wire[0]).toHaveLength(1);
    expect(wire[0]![0]!.byteLength).toBe(3 * 4 + 3 + 3 + 5);
    await expect(a.send(new Uint8Array(0))).rejects.toMatchObject({ code: 'ERR_SEND_REFUSED' });

    a.close(new (await import('../../src/transport/errors.ts')).TransportError('ERR_CLOSED', 'bye'));
    expect(aClosed?.code).toBe('ERR_CLOSED');
    // b sees END (a zero-length frame), reports the peer gone and answers with its own END; then
    // both sides are done and each closes its session.
    await waitFor(() => bClosed !== undefined, 1_000, 'b closed');
    expect(bClosed?.code).toBe('ERR_PEER_GONE');
    await waitFor(() => sessions[0]!.closed && sessions[1]!.closed, 1_000, 'both sessions closed');
    expect([...wire[0]!.at(-1)!]).toEqual([0, 0, 0, 0]);
    expect([...wire[1]!.at(-1)!]).toEqual([0, 0, 0, 0]);
  });

  it('refuses a frame over the limit with a GOAWAY, and admission waits while the reader is paused', async () => {
    const { a, b } = pipePair();
    const atA: Uint8Array[] = [];
    let aClosed: LanemuxError | undefined;
    a.start({ message: (m) => atA.push(m.slice()), closed: (e) => (aClosed = e) });
    let bClosed: LanemuxError | undefined;
    b.start({ message: () => {}, closed: (e) => (bClosed = e) });
    expect(b.pause()).toBe(true);
    // The in-memory pipe has no buffer: sends queue in the gate until b reads again.
    let pending: Promise<void> | undefined;
    for (let i = 0; i < 64 && pending === undefined; i++) {
      const adm = a.send(new Uint8Array(1000).fill(7));
      if (adm !== true) pending = adm;
    }
    expect(pending).toBeDefined();
    expect(a.bufferedAmount()).toBeGreaterThanOrEqual(16 * 1024);
    b.resume();
    await pending;
    // A frame larger than b's limit (1024): b answers GOAWAY + END and closes.
    void a.send(new Uint8Array(2000));
    await waitFor(() => bClosed !== undefined && aClosed !== undefined, 1_000, 'both closed');
    expect(bClosed?.code).toBe('ERR_FRAME_TOO_LARGE');
    expect(atA.some((m) => m[0] === 0xf1 && new TextDecoder().decode(m).includes('ERR_FRAME_TOO_LARGE'))).toBe(true);
  });
});
