/**
 * The consumer → producer direction of the `tcp-stream` transport: the stop request (protocol.md
 * §9). The consumer's `sink.stop()` reaches the producer's `onStop` listener once; a producer reads
 * whatever else a consumer writes as reserved frames and skips them without buffering.
 */
import net from 'node:net';
import { describe, it, expect, afterEach } from 'vitest';
import type { LanemuxError } from '../../src/errors.ts';
import type { PerStreamConnection, PerStreamSink } from '../../src/stream/per-stream.ts';
import { tcpStreamTransport, type TcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { within } from './helpers.ts';

const transports: TcpStreamTransport[] = [];
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
  await Promise.all(transports.splice(0).map((t) => t.close()));
});

function make(): TcpStreamTransport {
  const t = tcpStreamTransport();
  transports.push(t);
  return t;
}

function closed(conn: PerStreamConnection): Promise<LanemuxError | null> {
  return new Promise((resolve) => conn.onClose(resolve));
}

/** A sink that keeps its frames; `got(n)` resolves once it holds `n`. */
function sink(): PerStreamSink & {
  frames: Uint8Array[];
  got(n: number): Promise<void>;
  ended: Promise<LanemuxError | null>;
} {
  const frames: Uint8Array[] = [];
  const waiters: Array<() => void> = [];
  let onEnd!: (e: LanemuxError | null) => void;
  const ended = new Promise<LanemuxError | null>((r) => (onEnd = r));
  return {
    frames,
    ended,
    resume: null,
    frame(body) {
      frames.push(body);
      for (const w of waiters.splice(0)) w();
      return true;
    },
    end: (e) => onEnd(e),
    got(n) {
      return new Promise((resolve) => {
        const check = (): void => (frames.length >= n ? resolve() : void waiters.push(check));
        check();
      });
    },
  };
}

/** A raw consumer: a plain TCP server whose one accepted socket the test writes to by hand. */
async function rawConsumer(): Promise<{ endpoint: string; accepted: Promise<net.Socket> }> {
  const server = net.createServer();
  servers.push(server);
  const accepted = new Promise<net.Socket>((resolve) =>
    server.once('connection', (s) => {
      sockets.push(s);
      s.on('error', () => {});
      resolve(s);
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { endpoint: `tcp-stream://127.0.0.1:${(server.address() as net.AddressInfo).port}`, accepted };
}

describe('tcp-stream transport: the stop request (consumer → producer)', () => {
  it("sink.stop() reaches the producer's onStop listener once, however often it is called, and the stream goes on to a clean end", async () => {
    const consumer = make();
    const producer = make();
    const s = sink();
    const endpoint = await consumer.listen(() => s);
    const conn = await producer.connect(endpoint, 1n, 2n);
    expect(conn.write(Uint8Array.of(1))).toBe(true);
    await within(s.got(1), 2_000, 'the first frame');
    expect(typeof s.stop).toBe('function');
    let stops = 0;
    const stopped = new Promise<void>((resolve) =>
      conn.onStop!(() => {
        stops++;
        resolve();
      }),
    );
    s.stop!();
    s.stop!();
    await within(stopped, 2_000, 'the stop to reach the producer');
    expect(conn.write(Uint8Array.of(2))).toBe(true);
    conn.end();
    expect(await within(s.ended, 2_000, 'the clean end')).toBeNull();
    expect(await within(closed(conn), 2_000, 'the producer close')).toBeNull();
    expect(stops).toBe(1);
    expect(s.frames).toEqual([Uint8Array.of(1), Uint8Array.of(2)]);
    // A late listener still hears of the stop; after the end the sink's hook is gone.
    await within(new Promise<void>((resolve) => conn.onStop!(resolve)), 2_000, 'a late stop listener');
    expect(s.stop).toBeNull();
  });

  it('a producer skips reserved consumer frames (other lengths, unknown actions, a 4 GiB length) without stopping, and finds a stop split byte by byte', async () => {
    const raw = await rawConsumer();
    const producer = make();
    const conn = await producer.connect(raw.endpoint, 1n, 2n);
    let stops = 0;
    conn.onStop!(() => stops++);
    const socket = await raw.accepted;
    const bytes = Buffer.concat([
      Buffer.from([0, 0, 0, 0]), // an empty body
      Buffer.from([0, 0, 0, 5, 0, 0, 0, 1, 0]), // a stop's bytes inside a reserved body: not a stop
      Buffer.from([0, 0, 0, 1, 7]), // an unknown action
      Buffer.from([0, 0, 0, 2, 0, 0]), // a 2-byte body starting with 0
    ]);
    socket.write(bytes);
    const stopped = new Promise<void>((resolve) => conn.onStop!(resolve));
    // Then a real stop, one byte per segment, then another one (the listener hears only the first).
    for (const b of [0, 0, 0, 1, 0]) await new Promise<void>((resolve) => socket.write(Buffer.of(b), () => resolve()));
    await within(stopped, 2_000, 'the split stop');
    socket.write(Buffer.from([0, 0, 0, 1, 0]));
    // A length of 2^32 - 1: skipped by count as it arrives, never reserved.
    socket.write(Buffer.from([0xff, 0xff, 0xff, 0xff]));
    socket.write(Buffer.alloc(256 * 1024));
    // The producer still writes: the raw consumer sees the preface and the frame.
    const received: Buffer[] = [];
    socket.on('data', (c: Buffer) => received.push(c));
    expect(conn.write(Uint8Array.of(9))).toBe(true);
    conn.end();
    await new Promise<void>((resolve) => socket.once('end', () => resolve()));
    socket.end();
    expect(await within(closed(conn), 2_000, 'the producer close')).toBeNull();
    expect(stops).toBe(1);
    expect(Buffer.concat(received).subarray(-5)).toEqual(Buffer.from([0, 0, 0, 1, 9]));
  });

  it('reserved frames alone never stop the producer: a consumer that writes only those and ends leaves onStop silent', async () => {
    const raw = await rawConsumer();
    const producer = make();
    const conn = await producer.connect(raw.endpoint, 1n, 2n);
    let stops = 0;
    conn.onStop!(() => stops++);
    const socket = await raw.accepted;
    socket.end(Buffer.from([0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 2, 0]));
    // Every byte before the consumer's FIN is parsed before the close is reported.
    const error = await within(closed(conn), 2_000, 'the producer close');
    expect(error?.code).toBe('ERR_SENDER_DROPPED');
    expect(stops).toBe(0);
  });
});
