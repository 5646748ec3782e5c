// Half-sent frames on the per-stream `tcp-stream` path: the consumer's frames grow within the
// transport's frame pool, a large one has a deadline, and bytes held while the sink is full count too.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { LanemuxError } from '../../src/errors.ts';
import type { PerStreamSink } from '../../src/stream/per-stream.ts';
import { IncompleteFramePool, type FramePolicy } from '../../src/transport/frame-pool.ts';
import { tcpStreamTransport, type TcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';

const transports: TcpStreamTransport[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(transports.splice(0).map((t) => t.close()));
});

class Sink implements PerStreamSink {
  readonly frames: Uint8Array[] = [];
  resume: (() => void) | null = null;
  full = false;
  readonly ended: Promise<LanemuxError | null>;
  #end!: (e: LanemuxError | null) => void;
  constructor() {
    this.ended = new Promise((r) => (this.#end = r));
  }
  frame(body: Uint8Array): boolean {
    this.frames.push(body);
    return !this.full;
  }
  end(error: LanemuxError | null): void {
    this.#end(error);
  }
}

/** New sinks start full (their first frame pauses the connection) while this is true. */
let full = false;

async function listening(policy: FramePolicy): Promise<{ endpoint: string; sinks: Sink[] }> {
  full = false;
  const t = tcpStreamTransport({ framePolicy: policy });
  transports.push(t);
  const sinks: Sink[] = [];
  const endpoint = await t.listen(() => {
    const s = new Sink();
    s.full = full;
    sinks.push(s);
    return s;
  });
  return { endpoint, sinks };
}

/** A raw producer: connect, send the 16-byte preface. */
async function producer(endpoint: string): Promise<{ socket: net.Socket; closed: Promise<void> }> {
  const u = new URL(endpoint);
  const socket = net.connect({ host: u.hostname, port: Number(u.port) });
  sockets.push(socket);
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  socket.write(new Uint8Array(16));
  return { socket, closed };
}

function frame(body: Uint8Array): Buffer {
  const b = Buffer.alloc(4 + body.byteLength);
  b.writeUInt32BE(body.byteLength, 0);
  b.set(body, 4);
  return b;
}

describe('tcp-stream: incomplete frames', () => {
  it('ends the stream with ERR_FRAME_DEADLINE when a large frame stalls past its deadline, resets the producer and gives the pool its bytes back', async () => {
    const policy: FramePolicy = {
      pool: new IncompleteFramePool(64 << 20),
      largeFrameBytes: 64 * 1024,
      deadlineMs: 200,
    };
    const { endpoint, sinks } = await listening(policy);
    const p = await producer(endpoint);
    const t0 = performance.now();
    // A 1 MiB frame, 100 KiB of it sent.
    p.socket.write(frame(new Uint8Array(1 << 20)).subarray(0, 4 + 100 * 1024));
    await waitFor(() => policy.pool.held >= 100 * 1024, 5_000, 'the partial frame held');
    // Held as it arrived: never the announced 1 MiB up front.
    expect(policy.pool.held).toBeLessThanOrEqual(200 * 1024);
    const error = await within(sinks[0]!.ended, 5_000, 'the stream to end');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(200);
    expect(error?.code).toBe('ERR_FRAME_DEADLINE');
    expect(error?.message).toMatch(
      /frame of 1048576 bytes from tcp-stream peer .* did not complete within 200 ms of its first byte/,
    );
    await within(p.closed, 5_000, 'the producer reset');
    expect(policy.pool.held).toBe(0);
  });

  it('reserves the bytes it holds while the sink is full in the pool, delivers them in order on resume, and gives them back', async () => {
    const policy: FramePolicy = {
      pool: new IncompleteFramePool(64 << 20),
      largeFrameBytes: 64 * 1024,
      deadlineMs: 10_000,
    };
    const { endpoint, sinks } = await listening(policy);
    const p = await producer(endpoint);
    const bodies = Array.from({ length: 50 }, (_, i) => new Uint8Array(100).fill(i));
    full = true;
    // All in one write: the rest of the chunk after the first frame is held while the sink is full.
    p.socket.write(Buffer.concat(bodies.map(frame)));
    await waitFor(
      () => sinks.length === 1 && sinks[0]!.frames.length > 0 && policy.pool.held > 0,
      5_000,
      'the first frame, the rest held',
    );
    const sink = sinks[0]!;
    expect(sink.frames).toHaveLength(1);
    expect(policy.pool.held).toBeLessThanOrEqual(49 * 104);
    sink.full = false;
    sink.resume?.();
    await waitFor(() => sink.frames.length === 50, 5_000, 'every frame');
    expect(sink.frames.every((f, i) => f.byteLength === 100 && f[0] === i)).toBe(true);
    expect(policy.pool.held).toBe(0);
    p.socket.end();
    expect(await within(sink.ended, 5_000, 'the end')).toBeNull();
  });

  it('closes the connection, and only it, whose frame the full pool cannot hold', async () => {
    const policy: FramePolicy = {
      pool: new IncompleteFramePool(256 * 1024),
      largeFrameBytes: 64 * 1024,
      deadlineMs: 60_000,
    };
    const { endpoint, sinks } = await listening(policy);
    const greedy = await producer(endpoint);
    const honest = await producer(endpoint);
    greedy.socket.write(frame(new Uint8Array(1 << 20)).subarray(0, 4 + 600 * 1024));
    const error = await within(
      (async () => {
        await waitFor(() => sinks.length === 2, 5_000, 'both accepted');
        return Promise.race(sinks.map((s) => s.ended));
      })(),
      5_000,
      'the greedy stream to end',
    );
    expect(error?.code).toBe('ERR_FRAME_DEADLINE');
    expect(error?.message).toContain("the node's memory for incomplete frames is full");
    honest.socket.write(frame(Uint8Array.of(7, 7)));
    await waitFor(() => sinks.some((s) => s.frames.length > 0), 5_000, 'the honest frame');
    expect(sinks.flatMap((s) => s.frames.map((f) => [...f]))).toEqual([[7, 7]]);
    await within(greedy.closed, 5_000, 'the greedy producer reset');
    expect(policy.pool.held).toBe(0);
  });
});
