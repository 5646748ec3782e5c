/**
 * The per-stream (legacy) `tcp-stream` transport over Node TCP, on loopback only (127.0.0.1, port 0).
 * No sleeps: every wait is on an event, or a bounded poll (`waitFor`) where Node offers no event.
 */
import net from 'node:net';
import { describe, it, expect, afterEach } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import type { LanemuxError } from '../../src/errors.ts';
import { TCP_STREAM_KEY } from '../../src/wire/constants.ts';
import type { PerStreamConnection, PerStreamSink } from '../../src/stream/per-stream.ts';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import type { TcpStreamTransport, TcpStreamTransportOptions } from '../../src/adapters/node-tcp-stream.ts';
import { isSettled, within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

const transports: TcpStreamTransport[] = [];
const rawSockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of rawSockets.splice(0)) s.destroy();
  await Promise.all(transports.splice(0).map((t) => t.close()));
});

function make(options: TcpStreamTransportOptions = {}): TcpStreamTransport {
  const t = tcpStreamTransport(options);
  transports.push(t);
  return t;
}

/** A sink that records what it gets; `policy` decides the return value of `frame`. */
class RecordingSink implements PerStreamSink {
  readonly frames: Uint8Array[] = [];
  resume: (() => void) | null = null;
  endError: LanemuxError | null | undefined = undefined;
  endCalls = 0;
  readonly ended: Promise<LanemuxError | null>;
  #onEnd!: (e: LanemuxError | null) => void;
  policy: (body: Uint8Array, index: number) => boolean = () => true;

  constructor() {
    this.ended = new Promise((resolve) => {
      this.#onEnd = resolve;
    });
  }
  frame(body: Uint8Array): boolean {
    this.frames.push(body);
    return this.policy(body, this.frames.length - 1);
  }
  end(error: LanemuxError | null): void {
    this.endCalls++;
    this.endError = error;
    this.#onEnd(error);
  }
}

/** A listener that records every accept call and hands out sinks (or refuses with null). */
function acceptor(
  decide: (anchorId: bigint, sessionId: bigint) => boolean = () => true,
  policy?: RecordingSink['policy'],
) {
  const calls: Array<{ anchorId: bigint; sessionId: bigint }> = [];
  const sinks: RecordingSink[] = [];
  const waiters: Array<() => void> = [];
  const accept = (anchorId: bigint, sessionId: bigint): PerStreamSink | null => {
    calls.push({ anchorId, sessionId });
    for (const w of waiters.splice(0)) w();
    if (!decide(anchorId, sessionId)) return null;
    const sink = new RecordingSink();
    if (policy !== undefined) sink.policy = policy;
    sinks.push(sink);
    return sink;
  };
  /** Resolves once accept has been called `n` times. */
  const called = (n: number): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (calls.length >= n) resolve();
        else waiters.push(check);
      };
      check();
    });
  return { accept, calls, sinks, called };
}

/** The close reason of a producer connection. */
function closed(conn: PerStreamConnection): Promise<LanemuxError | null> {
  return new Promise((resolve) => conn.onClose(resolve));
}

/** Deterministic body `i` of `size` bytes. */
function body(i: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let k = 0; k < size; k++) b[k] = (i * 31 + k * 7) & 0xff;
  return b;
}

/** Indexes where `got` differs from `want` (toEqual on thousands of large arrays is very slow). */
function mismatches(got: readonly Uint8Array[], want: readonly Uint8Array[]): number[] {
  const bad: number[] = [];
  for (let i = 0; i < Math.max(got.length, want.length); i++) {
    const a = got[i];
    const b = want[i];
    if (a === undefined || b === undefined || Buffer.compare(a, b) !== 0) bad.push(i);
  }
  return bad;
}

async function writeAll(conn: PerStreamConnection, bodies: Uint8Array[]): Promise<void> {
  for (const b of bodies) {
    const r = conn.write(b);
    if (r !== true) await r;
  }
}

/** A raw loopback socket to the listener, for bytes a well-behaved producer would never send. */
function rawConnect(endpoint: string): Promise<net.Socket> {
  const url = new URL(endpoint);
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: url.hostname, port: Number(url.port) });
    rawSockets.push(s);
    s.on('error', () => {}); // the listener resets it; that is the point
    s.once('connect', () => {
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', reject);
  });
}

function preface(anchorId: bigint, sessionId: bigint): Uint8Array {
  const b = Buffer.alloc(16);
  b.writeBigUInt64BE(anchorId, 0);
  b.writeBigUInt64BE(sessionId, 8);
  return b;
}

function socketClosed(s: net.Socket): Promise<void> {
  return s.closed ? Promise.resolve() : new Promise((resolve) => s.once('close', () => resolve()));
}

function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length;
}

const ANCHOR = 0xfedc_ba98_7654_3210n; // high bit set: ids are unsigned 64-bit
const SESSION = 0x0123_4567_89ab_cdefn;

describe('tcp-stream transport: frames', () => {
  it('round-trips 1,000 frames in order (0 B to 64 KiB), with the right ids, one write per frame and a clean end both ways', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);
    expect(endpoint).toMatch(/^tcp-stream:\/\/127\.0\.0\.1:\d+$/);
    expect(consumer.endpoint).toBe(endpoint);
    expect(consumer.key).toBe(TCP_STREAM_KEY);

    const sizes = [0, 1, 3, 4, 5, 100, 1460, 4096, 65_536, 12_345, 0, 65_535];
    const bodies = Array.from({ length: 1000 }, (_, i) => body(i, sizes[i % sizes.length]!));
    const conn = await producer.connect(endpoint, ANCHOR, SESSION);
    const producerClosed = closed(conn);
    await writeAll(conn, bodies);
    expect(producer.writes).toBe(1000);
    conn.end();

    await acc.called(1);
    expect(acc.calls).toEqual([{ anchorId: ANCHOR, sessionId: SESSION }]);
    const sink = acc.sinks[0]!;
    expect(await within(sink.ended, 10_000, 'sink end')).toBeNull();
    expect(await within(producerClosed, 10_000, 'producer close')).toBeNull();
    expect(sink.endCalls).toBe(1);
    expect(sink.frames.length).toBe(1000);
    expect(mismatches(sink.frames, bodies)).toEqual([]);
    // The consumer never writes frames; the preface is setup, not a frame.
    expect(consumer.writes).toBe(0);
  });

  it('delivers bodies the consumer may keep: none aliases another or a later one', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const conn = await producer.connect(await consumer.listen(acc.accept), 1n, 2n);
    const bodies = Array.from({ length: 200 }, (_, i) => body(i, 10));
    await writeAll(conn, bodies);
    conn.end();
    await acc.called(1);
    const sink = acc.sinks[0]!;
    await sink.ended;
    // Scribble over every delivered body; if any shared memory, another would change.
    const snapshot = sink.frames.map((f) => f.slice());
    for (const f of sink.frames) f.fill(0xee);
    for (let i = 0; i < bodies.length; i++) {
      expect(snapshot[i]).toEqual(bodies[i]);
      expect(sink.frames[i]!.byteLength).toBe(10);
    }
    const buffers = new Set(sink.frames.map((f) => f.buffer));
    expect(buffers.size).toBe(sink.frames.length);
  });

  it('counts one write per frame in `writes`, across connections', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);
    const a = await producer.connect(endpoint, 1n, 1n);
    const b = await producer.connect(endpoint, 2n, 2n);
    expect(producer.writes).toBe(0); // prefaces are not frames
    await writeAll(a, [body(1, 1), body(2, 2), body(3, 3)]);
    await writeAll(b, [body(4, 0), body(5, 65_536)]);
    expect(producer.writes).toBe(5);
    a.end();
    b.end();
    await acc.called(2);
    await Promise.all(acc.sinks.map((s) => s.ended));
    expect(acc.sinks.map((s) => s.frames.length).sort()).toEqual([2, 3]);
  });

  it('a sink that pauses after every frame still gets every frame, once and in order', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const conn = await producer.connect(await consumer.listen(acc.accept), 7n, 8n);
    // Small frames: many share one TCP read, so most pauses land mid-chunk.
    const bodies = Array.from({ length: 500 }, (_, i) => body(i, i % 20));
    const done = closed(conn);
    await writeAll(conn, bodies);
    conn.end();
    await acc.called(1);
    const sink = acc.sinks[0]!;
    let offeredWhilePaused = 0;
    let paused = false;
    sink.policy = () => {
      if (paused) offeredWhilePaused++;
      paused = true;
      // Resume on a later macrotask, as a consumer taking from its buffer would.
      setImmediate(() => {
        paused = false;
        sink.resume?.();
      });
      return false;
    };
    expect(await within(sink.ended, 10_000, 'sink end')).toBeNull();
    expect(offeredWhilePaused).toBe(0);
    expect(sink.frames).toEqual(bodies);
    expect(await done).toBeNull();
  });
});

describe('tcp-stream transport: back-pressure', () => {
  it('a paused sink stops the reader; the producer gets a drain promise that resolves only after resume', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor(undefined, () => false); // full after the first frame
    const conn = await producer.connect(await consumer.listen(acc.accept), 11n, 12n);
    const first = conn.write(body(0, 16));
    expect(first).toBe(true);
    await acc.called(1);
    const sink = acc.sinks[0]!;
    await waitFor(() => sink.frames.length === 1, 5_000, 'the first frame');
    expect(typeof sink.resume).toBe('function');

    // Fill the loopback path (producer buffer, both kernels, the consumer's bounded read-ahead).
    const frame = 16 * 1024;
    let sent = 1;
    let pending: true | Promise<void> = true;
    while (pending === true) {
      if (sent > 20_000) throw new Error('write never asked to wait: no back-pressure');
      pending = conn.write(body(sent, frame));
      sent++;
    }
    const drain: Promise<void> = pending;
    const order: string[] = [];
    drain.then(
      () => order.push('drained'),
      () => order.push('rejected'),
    );

    // Still paused: the reader offered nothing more, and the drain stays pending over event-loop turns.
    for (let turn = 0; turn < 5; turn++) expect(await isSettled(drain)).toBe(false);
    expect(sink.frames.length).toBe(1);
    expect(order).toEqual([]);

    sink.policy = () => true;
    order.push('resume');
    sink.resume!();
    await within(drain, 10_000, 'drain after resume');
    expect(order).toEqual(['resume', 'drained']);

    conn.end();
    expect(await within(sink.ended, 10_000, 'sink end')).toBeNull();
    expect(sink.frames.length).toBe(sent);
    for (let i = 1; i < sent; i++) expect(sink.frames[i]!.byteLength).toBe(frame);
    expect(sink.frames[sent - 1]).toEqual(body(sent - 1, frame));
  });

  it('frames stashed by a pause are delivered before the clean end that followed them', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor(undefined, (_b, i) => i !== 0); // pause after the first frame only
    const conn = await producer.connect(await consumer.listen(acc.accept), 1n, 3n);
    const bodies = Array.from({ length: 50 }, (_, i) => body(i, 8));
    await writeAll(conn, bodies);
    conn.end();
    await acc.called(1);
    const sink = acc.sinks[0]!;
    await waitFor(() => sink.frames.length === 1, 5_000, 'the first frame');
    // The producer's FIN is behind the stashed frames: no end yet.
    expect(await isSettled(sink.ended)).toBe(false);
    sink.resume!();
    expect(await within(sink.ended, 5_000, 'sink end')).toBeNull();
    expect(sink.frames).toEqual(bodies);
  });
});

describe('tcp-stream transport: refusal and bad input', () => {
  it('refusing (accept → null) closes the producer connection with an error', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor(() => false);
    const conn = await producer.connect(await consumer.listen(acc.accept), ANCHOR, 99n);
    const reason = closed(conn);
    await acc.called(1);
    expect(acc.calls).toEqual([{ anchorId: ANCHOR, sessionId: 99n }]);
    const error = await within(reason, 5_000, 'producer close');
    expect(isLanemuxError(error, 'ERR_SENDER_DROPPED')).toBe(true);
    expect(error!.retryable).toBe(true);
    // Writes after the close are refused with that error, without throwing.
    await expect(conn.write(body(0, 4))).rejects.toBe(error);
    expect(acc.sinks).toEqual([]);
  });

  it('refusal is seen as an error even when the producer already ended its side', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor(() => false);
    const conn = await producer.connect(await consumer.listen(acc.accept), 5n, 6n);
    const reason = closed(conn);
    conn.write(body(1, 100));
    conn.end();
    const error = await within(reason, 5_000, 'producer close');
    expect(error).not.toBeNull();
    expect(isLanemuxError(error, 'ERR_SENDER_DROPPED')).toBe(true);
  });

  it('an oversize length prefix resets that connection with ERR_FRAME_TOO_LARGE; a concurrent one keeps working', async () => {
    const consumer = make({ maxFrameBytes: 1024 });
    const producer = make({ maxFrameBytes: 1024 });
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);
    const good = await producer.connect(endpoint, 1n, 1n);
    await writeAll(good, [body(0, 1024)]); // exactly the limit is fine
    await acc.called(1);

    const raw = await rawConnect(endpoint);
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(1025, 0);
    raw.write(Buffer.concat([preface(2n, 2n), prefix, Buffer.alloc(64)]));
    await acc.called(2);
    const bad = acc.sinks[1]!;
    const error = await within(bad.ended, 5_000, 'bad sink end');
    expect(isLanemuxError(error, 'ERR_FRAME_TOO_LARGE')).toBe(true);
    expect(error!.message).toContain('1025');
    expect(bad.frames).toEqual([]);
    await within(socketClosed(raw), 5_000, 'raw socket close');

    // The huge prefix a garbage stream produces is refused the same way, without allocating it.
    const raw2 = await rawConnect(endpoint);
    raw2.write(Buffer.concat([preface(3n, 3n), Buffer.from([0xff, 0xff, 0xff, 0xff])]));
    await acc.called(3);
    expect(isLanemuxError(await within(acc.sinks[2]!.ended, 5_000, 'sink end'), 'ERR_FRAME_TOO_LARGE')).toBe(true);

    await writeAll(good, [body(1, 0), body(2, 500)]);
    good.end();
    const sink = acc.sinks[0]!;
    expect(await within(sink.ended, 5_000, 'good sink end')).toBeNull();
    expect(sink.frames).toEqual([body(0, 1024), body(1, 0), body(2, 500)]);
  });

  it('garbage: a stream ending inside a frame gets ERR_MALFORMED_FRAME; one ending inside the preface is never accepted', async () => {
    const consumer = make();
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);

    const raw = await rawConnect(endpoint);
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(10, 0);
    raw.end(Buffer.concat([preface(4n, 4n), prefix, Buffer.from('abc')])); // 3 of 10 bytes, then FIN
    await acc.called(1);
    const error = await within(acc.sinks[0]!.ended, 5_000, 'sink end');
    expect(isLanemuxError(error, 'ERR_MALFORMED_FRAME')).toBe(true);

    const raw2 = await rawConnect(endpoint);
    raw2.end(Buffer.from('GET / HT')); // 8 bytes, then FIN
    await within(socketClosed(raw2), 5_000, 'raw socket close');
    expect(acc.calls.length).toBe(1);

    // An HTTP request is 16 bytes of "preface" with nonsense ids: the listener refuses them.
    const raw3 = await rawConnect(endpoint);
    raw3.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await within(socketClosed(raw3), 5_000, 'raw socket close');
    expect(acc.calls.length).toBe(2);
    expect(acc.calls[1]!.anchorId).toBe(Buffer.from('GET / HT').readBigUInt64BE(0));
  });

  it('a socket that does not send its preface in time is reset', async () => {
    const consumer = make({ prefaceTimeoutMs: 50 });
    const acc = acceptor();
    const raw = await rawConnect(await consumer.listen(acc.accept));
    raw.write(Buffer.from([1, 2, 3]));
    await within(socketClosed(raw), 5_000, 'raw socket close');
    expect(acc.calls).toEqual([]);
    await waitFor(() => consumer.openSockets === 0, 5_000, 'the listener to forget the socket');
  });

  it('the preface deadline runs on the runtime the node gives it (setRuntime): a manual clock decides', async () => {
    // A minute: real time never reaches it within the test, only the manual clock does.
    const consumer = make({ prefaceTimeoutMs: 60_000 });
    const rt = new ManualRuntime();
    consumer.setRuntime(rt);
    const acc = acceptor();
    const raw = await rawConnect(await consumer.listen(acc.accept));
    const closedP = socketClosed(raw);
    await waitFor(() => rt.timerCount > 0, 5_000, 'the preface timer on the manual clock');
    await rt.advance(59_999);
    expect(await isSettled(closedP)).toBe(false);
    await rt.advance(1);
    await within(closedP, 5_000, 'raw socket close');
    expect(acc.calls).toEqual([]);
  });

  it('connections beyond maxConnections are refused; held ones keep working', async () => {
    const consumer = make({ maxConnections: 1 });
    const producer = make();
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);
    const first = await producer.connect(endpoint, 1n, 1n);
    await acc.called(1);
    // The reset may beat the dialler's 'connect' (the dial fails) or follow it (the connection closes).
    const error = await within(
      producer.connect(endpoint, 2n, 2n).then(closed, (e: unknown) => e as LanemuxError),
      5_000,
      'second connection refused',
    );
    expect(isLanemuxError(error, 'ERR_SENDER_DROPPED') || isLanemuxError(error, 'ERR_CONNECT')).toBe(true);
    expect(error!.retryable).toBe(true);
    expect(consumer.refusedOverLimit).toBe(1);
    expect(acc.calls.length).toBe(1);
    await writeAll(first, [body(1, 10)]);
    first.end();
    expect(await within(acc.sinks[0]!.ended, 5_000, 'sink end')).toBeNull();
    expect(acc.sinks[0]!.frames).toEqual([body(1, 10)]);
  });

  it('a producer write over maxFrameBytes fails the connection instead of skipping the frame', async () => {
    const consumer = make();
    const producer = make({ maxFrameBytes: 100 });
    const acc = acceptor();
    const conn = await producer.connect(await consumer.listen(acc.accept), 1n, 2n);
    const reason = closed(conn);
    expect(conn.write(body(0, 100))).toBe(true);
    const r = conn.write(body(1, 101));
    expect(r).not.toBe(true);
    await expect(r).rejects.toMatchObject({ code: 'ERR_FRAME_TOO_LARGE' });
    expect(isLanemuxError(await reason, 'ERR_FRAME_TOO_LARGE')).toBe(true);
    expect(producer.writes).toBe(1);
    // The consumer got the frame before it and then the end; never the oversize one. (Whether an RST
    // with unread data surfaces as an error or an EOF is the kernel's call; the stream layer relies
    // on the missing terminal frame either way.)
    await acc.called(1);
    await within(acc.sinks[0]!.ended, 5_000, 'sink end');
    expect(acc.sinks[0]!.frames).toEqual([body(0, 100)]);
  });

  it('destroy() aborts: the consumer sees an error, the producer its own reason', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const conn = await producer.connect(await consumer.listen(acc.accept), 1n, 2n);
    await writeAll(conn, [body(0, 10)]);
    await acc.called(1);
    await waitFor(() => acc.sinks[0]!.frames.length === 1, 5_000, 'the frame');
    const reason = closed(conn);
    conn.destroy();
    expect(isLanemuxError(await reason, 'ERR_CLOSED')).toBe(true);
    expect(isLanemuxError(await within(acc.sinks[0]!.ended, 5_000, 'sink end'), 'ERR_SENDER_DROPPED')).toBe(true);
    // onClose after the fact still reports, once.
    expect(isLanemuxError(await closed(conn), 'ERR_CLOSED')).toBe(true);
  });
});

describe('tcp-stream transport: dialling', () => {
  it('rejects endpoints that are not tcp-stream://host:port, and ids outside u64', async () => {
    const producer = make();
    for (const bad of [
      'tcp://127.0.0.1:1',
      'tcp-stream://127.0.0.1',
      'tcp-stream://u:p@127.0.0.1:1',
      'tcp-stream://127.0.0.1:1/x',
      'tcp-stream://127.0.0.1:1?q',
      'tcp-stream://127.0.0.1:70000',
      'nonsense',
    ]) {
      await expect(producer.connect(bad, 1n, 1n), bad).rejects.toMatchObject({ code: 'ERR_UNSUPPORTED_ADDRESS' });
    }
    await expect(producer.connect('tcp-stream://127.0.0.1:1', -1n, 1n)).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    await expect(producer.connect('tcp-stream://127.0.0.1:1', 1n, 1n << 64n)).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    expect(() => tcpStreamTransport({ maxFrameBytes: 0 })).toThrow(/maxFrameBytes/);
    expect(() => tcpStreamTransport({ port: -1 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }));
  });

  it('a refused dial fails with a retryable ERR_CONNECT', async () => {
    // A port that was just free: listen, note it, close.
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const producer = make();
    const error = await producer.connect(`tcp-stream://127.0.0.1:${port}`, 1n, 1n).catch((e: unknown) => e);
    expect(isLanemuxError(error, 'ERR_CONNECT')).toBe(true);
    expect((error as LanemuxError).retryable).toBe(true);
    await waitFor(() => producer.openSockets === 0, 5_000, 'the failed socket to close');
  });

  it('honours the AbortSignal, before and during the dial', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);
    await expect(producer.connect(endpoint, 1n, 1n, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'ERR_ABORTED',
    });
    const ac = new AbortController();
    const dialling = producer.connect(endpoint, 1n, 1n, { signal: ac.signal });
    ac.abort(new Error('changed my mind')); // 'connect' cannot have fired yet: it is a later event
    await expect(dialling).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await waitFor(() => producer.openSockets === 0, 5_000, 'the aborted socket to close');
  });
});

describe('tcp-stream transport: close', () => {
  it('close() stops the listener, ends every connection on both sides, and leaves no TCP handle behind', async () => {
    const before = tcpHandles();
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const endpoint = await consumer.listen(acc.accept);
    const kept = await producer.connect(endpoint, 1n, 1n); // left open on purpose
    const other = await producer.connect(endpoint, 2n, 2n);
    await writeAll(kept, [body(0, 5)]);
    await acc.called(2);
    expect(consumer.listening).toBe(true);
    expect(consumer.openSockets).toBe(2);
    expect(producer.openSockets).toBe(2);
    expect(tcpHandles()).toBeGreaterThan(before);

    const keptClosed = closed(kept);
    await producer.close();
    expect(isLanemuxError(await keptClosed, 'ERR_CLOSED')).toBe(true);
    expect(isLanemuxError(await closed(other), 'ERR_CLOSED')).toBe(true);
    expect(producer.openSockets).toBe(0);
    await expect(producer.connect(endpoint, 3n, 3n)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect(kept.write(body(1, 1))).not.toBe(true);

    await consumer.close();
    expect(consumer.listening).toBe(false);
    expect(consumer.openSockets).toBe(0);
    for (const s of acc.sinks) expect(s.endCalls).toBe(1);
    await expect(consumer.listen(acc.accept)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    await consumer.close(); // idempotent
    // The server handle is released a moment after its 'close' event: poll, bounded.
    await waitFor(() => tcpHandles() <= before, 5_000, 'TCP handles to be released');
  });

  it('listen twice is refused; close() racing listen() leaves no server behind', async () => {
    const once = make();
    await once.listen(() => null);
    await expect(once.listen(() => null)).rejects.toMatchObject({ code: 'ERR_LISTEN' });
    // A port in use fails with ERR_LISTEN and leaves the transport able to try again.
    const port = Number(new URL(once.endpoint!).port);
    const clash = make({ port });
    await expect(clash.listen(() => null)).rejects.toMatchObject({ code: 'ERR_LISTEN' });
    expect(clash.listening).toBe(false);

    const t = make();
    const listening = t.listen(() => null);
    const closing = t.close();
    await expect(listening).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    await closing;
    await waitFor(() => !t.listening, 5_000, 'the late server to close');
    expect(t.endpoint).toBeNull();
  });

  it('close() with live consumer connections ends their sinks with ERR_CLOSED and the producers see an error', async () => {
    const consumer = make();
    const producer = make();
    const acc = acceptor();
    const conn = await producer.connect(await consumer.listen(acc.accept), 1n, 1n);
    const reason = closed(conn);
    await acc.called(1);
    await consumer.close();
    expect(isLanemuxError(await acc.sinks[0]!.ended, 'ERR_CLOSED')).toBe(true);
    expect(isLanemuxError(await within(reason, 5_000, 'producer close'), 'ERR_SENDER_DROPPED')).toBe(true);
  });
});
