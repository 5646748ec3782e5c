// Messenger behaviour beyond the shared transport suite: hostile and confused peers (raw TCP
// sockets, bad envelopes, version mismatch), handler failures, registration rules, negotiation,
// superseding links, limits and the health check.
import net from 'node:net';
import fc from 'fast-check';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { LanemuxError, isLanemuxError } from '../../src/errors.ts';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger, MessengerErrorEvent } from '../../src/messenger/types.ts';
import { decodeGoaway, encodeHello } from '../../src/transport/hello.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { PROTOCOL_VERSION, type Connection, type TransportAdapter } from '../../src/transport/port.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { nextGone, nextPeer, within } from '../transport/helpers.ts';
import { waitFor } from '../support/wait-for.ts';

const open: Messenger[] = [];
const sockets: net.Socket[] = [];
const adapters: TransportAdapter[] = [];
const network = createMemoryNetwork();

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(open.splice(0).map((m) => m.close()));
  await Promise.all(adapters.splice(0).map((a) => a.close()));
});

async function tcpNode(extra: Partial<MessengerOptions> = {}, listen = true): Promise<Messenger> {
  const m = await createMessenger({
    transports: [tcpTransport({ listen, closeGraceMs: 200 })],
    healthCheck: false,
    ...extra,
  });
  open.push(m);
  return m;
}

async function memNode(extra: Partial<MessengerOptions> = {}): Promise<Messenger> {
  const m = await createMessenger({ transports: [memoryTransport({ network })], healthCheck: false, ...extra });
  open.push(m);
  return m;
}

/** A raw TCP socket to a messenger, collecting length-prefixed frames it receives. */
async function rawTcp(address: string): Promise<{ socket: net.Socket; frames: Uint8Array[]; closed: Promise<void> }> {
  const url = new URL(address);
  const socket = net.connect({ host: url.hostname, port: Number(url.port) });
  sockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => {});
  const frames: Uint8Array[] = [];
  let buf = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const n = buf.readUInt32BE(0);
      frames.push(new Uint8Array(buf.subarray(4, 4 + n)));
      buf = buf.subarray(4 + n);
    }
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, frames, closed };
}

function lp(message: Uint8Array): Buffer {
  const b = Buffer.alloc(4 + message.byteLength);
  b.writeUInt32BE(message.byteLength, 0);
  b.set(message, 4);
  return b;
}

function helloFrom(worker: string, extra: Partial<Parameters<typeof encodeHello>[0]> = {}): Uint8Array {
  return encodeHello({
    protocolVersion: PROTOCOL_VERSION,
    worker,
    instance: 'raw',
    session: 1,
    lane: 0,
    lanes: 1,
    maxMessageSize: 1 << 20,
    keys: [],
    ...extra,
  });
}

describe('hostile bytes on a raw TCP socket', () => {
  it('answers an HTTP request with a GOAWAY and closes, leaving other peers alone', async () => {
    const server = await tcpNode();
    const client = await tcpNode({}, false);
    server.handle('echo', (_f, b) => b);
    const peer = await client.connect(server.addresses[0] as string);
    const raw = await rawTcp(server.addresses[0] as string);
    raw.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await within(raw.closed, 3_000, 'garbage socket closed');
    const goaway = raw.frames.find((f) => f[0] === 0xf1);
    expect(goaway).toBeDefined();
    const reason = decodeGoaway(goaway as Uint8Array);
    expect(reason.code).toBe('ERR_FRAME_TOO_LARGE');
    expect(reason.message).toMatch(/frame of \d+ bytes .* exceeds the limit of 16384/);
    await expect(client.request(peer.id, 'echo', 42)).resolves.toBe(42);
  });

  it('answers a small non-HELLO frame with ERR_MALFORMED_ENVELOPE', async () => {
    const server = await tcpNode();
    const raw = await rawTcp(server.addresses[0] as string);
    raw.socket.write(lp(Uint8Array.of(1, 2, 3, 4, 5)));
    await within(raw.closed, 3_000, 'closed');
    expect(decodeGoaway(raw.frames.find((f) => f[0] === 0xf1) as Uint8Array).code).toBe('ERR_MALFORMED_ENVELOPE');
  });

  it('refuses an oversized frame after the hello from its header, with ERR_FRAME_TOO_LARGE', async () => {
    const server = await tcpNode({ maxMessageSize: 4096 });
    const gone = nextGone(server);
    const raw = await rawTcp(server.addresses[0] as string);
    raw.socket.write(lp(helloFrom('00000000000000ab')));
    await waitFor(() => raw.frames.length > 0, 2_000, 'HELLO answer');
    // Announce 1 MiB; send only the header. The server must not wait for (or allocate) the body.
    raw.socket.write(Buffer.from([0, 0x10, 0, 0]));
    await within(raw.closed, 3_000, 'closed after oversized header');
    expect(decodeGoaway(raw.frames.find((f) => f[0] === 0xf1) as Uint8Array).code).toBe('ERR_FRAME_TOO_LARGE');
    const e = await within(gone, 2_000, 'peer gone');
    expect(e.code).toBe('ERR_FRAME_TOO_LARGE');
  });

  it('closes a connection that never says hello after helloTimeoutMs, with a retryable ERR_CONNECT (a slow hello is worth a retry)', async () => {
    const server = await tcpNode({ helloTimeoutMs: 100 });
    const raw = await rawTcp(server.addresses[0] as string);
    const t0 = performance.now();
    await within(raw.closed, 2_000, 'silent socket closed');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    const reason = decodeGoaway(raw.frames.find((f) => f[0] === 0xf1) as Uint8Array);
    expect([reason.code, reason.retryable]).toEqual(['ERR_CONNECT', true]);
  });

  it('at maxHandshakes the oldest connection still in its hello is evicted, so a new peer is never locked out', async () => {
    const server = await tcpNode({ maxHandshakes: 2 });
    const a = await rawTcp(server.addresses[0] as string);
    const b = await rawTcp(server.addresses[0] as string);
    await waitFor(() => server.stats().refused.handshake_evicted === 0);
    const c = await rawTcp(server.addresses[0] as string);
    await within(a.closed, 2_000, 'oldest silent socket evicted');
    expect(server.stats().refused.handshake_evicted).toBe(1);
    expect(b.socket.destroyed || c.socket.destroyed).toBe(false);
    // Two silent sockets hold both places; an honest peer still gets in (it evicts the oldest).
    const client = await tcpNode({}, false);
    server.handle('echo', (_f, body) => body);
    const peer = await client.connect(server.addresses[0] as string);
    await expect(client.request(peer.id, 'echo', 7)).resolves.toBe(7);
    await within(b.closed, 2_000, 'next oldest evicted');
  });

  it('never crashes on random envelopes after a valid hello (fuzz)', async () => {
    const server = await tcpNode();
    const client = await tcpNode({}, false);
    server.handle('echo', (_f, b) => b);
    server.on('tok', () => {});
    server.registerBatchHandler(0, () => {});
    server.onError(() => {});
    const peer = await client.connect(server.addresses[0] as string);
    const messages = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 64 }), 300);
    let closedLinks = 0;
    for (let i = 0; i < messages.length; i += 30) {
      const raw = await rawTcp(server.addresses[0] as string);
      raw.socket.write(lp(helloFrom((0x1000 + i).toString(16).padStart(16, '0'))));
      await waitFor(() => raw.frames.length > 0, 2_000, 'HELLO answer');
      for (const m of messages.slice(i, i + 30)) raw.socket.write(lp(m));
      // Either the server closes the link (malformed) or it stays up; a ping proves the server lives.
      await new Promise((r) => setTimeout(r, 20));
      if (raw.socket.destroyed || raw.socket.readableEnded) closedLinks++;
      raw.socket.destroy();
    }
    await expect(client.request(peer.id, 'echo', 'alive')).resolves.toBe('alive');
    expect(closedLinks).toBeGreaterThan(0);
  });
});

describe('envelope errors', () => {
  /** A raw memory connection that completed a HELLO as worker `worker`. */
  async function rawMemory(
    address: string,
    worker: string,
  ): Promise<{ conn: Connection; messages: Uint8Array[]; closed: Promise<LanemuxError> }> {
    const adapter = memoryTransport({ network, listen: false });
    adapters.push(adapter);
    const r = await new Promise<{ conn: Connection; messages: Uint8Array[]; closed: Promise<LanemuxError> }>(
      (resolve, reject) => {
        adapter.dial(
          {
            address,
            lane: 0,
            frameLimit: 1 << 20,
            maxMessageSize: 1 << 20,
            reconnect: false,
            runtime: systemRuntime(),
          },
          {
            open(conn) {
              const messages: Uint8Array[] = [];
              let done!: (e: LanemuxError) => void;
              const closed = new Promise<LanemuxError>((res) => (done = res));
              conn.start({ message: (b) => messages.push(b), closed: (e) => done(e) });
              resolve({ conn, messages, closed });
            },
            fail: reject,
          },
        );
      },
    );
    void r.conn.send(helloFrom(worker));
    await waitFor(() => r.messages.length > 0, 2_000, 'HELLO answer');
    return r;
  }

  const cases: Array<[string, number[]]> = [
    ['MESSAGE whose name runs past the end', [0x02, 200, 0x61]],
    ['MESSAGE with an empty name', [0x02, 0]],
    ['REQUEST too short', [0x03, 0, 0, 0, 1]],
    ['PING of the wrong length', [0x07, 0, 0]],
    ['unknown kind', [0x42]],
    ['reserved kind 0x00', [0x00, 1]],
    ['second HELLO', [0xf0, 0x4c, 0x4d, 0x58, 0, 1]],
  ];
  for (const [what, bytes] of cases) {
    it(`closes the link on ${what} with ERR_MALFORMED_ENVELOPE`, async () => {
      const server = await memNode();
      const gone = nextGone(server);
      const r = await rawMemory(server.addresses[0] as string, '00000000000000cd');
      void r.conn.send(Uint8Array.from(bytes));
      await within(r.closed, 2_000, 'closed');
      const goaway = r.messages.find((m) => m[0] === 0xf1);
      expect(decodeGoaway(goaway as Uint8Array).code).toBe('ERR_MALFORMED_ENVELOPE');
      expect((await gone).code).toBe('ERR_MALFORMED_ENVELOPE');
      expect(server.stats().malformed + (what === 'second HELLO' ? 1 : 0)).toBeGreaterThanOrEqual(1);
    });
  }

  it('answers a request whose body is not MessagePack with an error reply and keeps the link', async () => {
    const server = await memNode();
    server.handle('x', () => 1);
    const r = await rawMemory(server.addresses[0] as string, '00000000000000ce');
    void r.conn.send(Uint8Array.from([0x03, 0, 0, 0, 9, 1, 0x78, 0xc1])); // 0xc1 is never valid
    await waitFor(() => r.messages.length > 1, 2_000, 'reply');
    const reply = r.messages[1] as Uint8Array;
    expect(reply[0]).toBe(0x05);
    expect(new TextDecoder().decode(reply)).toContain('ERR_MALFORMED_ENVELOPE');
    void r.conn.send(Uint8Array.from([0x07, 0, 0, 0, 5]));
    await waitFor(() => r.messages.length > 2, 2_000, 'pong');
    expect([...(r.messages[2] as Uint8Array)]).toEqual([0x08, 0, 0, 0, 5]);
  });
});

describe('handlers', () => {
  it('tells the sender once per name about an unknown fire-and-forget handler', async () => {
    const server = await memNode();
    const client = await memNode();
    const peer = await client.connect(server.addresses[0] as string);
    const notices: MessengerErrorEvent[] = [];
    client.onError((e) => notices.push(e));
    for (let i = 0; i < 5; i++) void client.send(peer.id, 0, 'nobody', new Uint8Array(3));
    void client.sendBatch(peer.id, 0, new Uint8Array(20));
    await waitFor(() => notices.length === 2, 2_000, 'two notices');
    await new Promise((r) => setTimeout(r, 20));
    expect(notices.length).toBe(2);
    expect(notices.map((n) => [n.source, n.handler, (n.error as LanemuxError).code])).toEqual([
      ['remote', 'nobody', 'ERR_UNKNOWN_HANDLER'],
      ['remote', '_stream_batch', 'ERR_UNKNOWN_HANDLER'],
    ]);
    expect(server.stats().unknownHandler).toBe(6);
    expect(client.stats().remoteNotices).toBe(2);
  });

  it('survives a throwing ordered handler, reports and counts it, and keeps order', async () => {
    const server = await memNode();
    const client = await memNode();
    const peer = await client.connect(server.addresses[0] as string);
    const seen: number[] = [];
    const errors: MessengerErrorEvent[] = [];
    server.onError((e) => errors.push(e));
    server.on('n', (_f, _l, p) => {
      seen.push(p[0] as number);
      if (p[0] === 2) throw new Error('boom');
    });
    server.handle('bad', () => {
      throw new TypeError('oops');
    });
    for (let i = 0; i < 5; i++) void client.send(peer.id, 0, 'n', Uint8Array.of(i));
    await expect(client.request(peer.id, 'bad', null)).rejects.toMatchObject({ code: 'ERR_HANDLER_FAILED' });
    await waitFor(() => seen.length === 5, 2_000, 'five messages');
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    expect(errors.map((e) => e.handler)).toEqual(['n', 'bad']);
    expect(server.stats().handlerErrors).toBe(2);
  });

  it('a handler registered with { signal: false } is called without a signal; a cancelled request still sends no reply', async () => {
    const server = await memNode();
    const client = await memNode();
    const peer = await client.connect(server.addresses[0] as string);
    const releases: Array<() => void> = [];
    const signals: Array<AbortSignal | undefined> = [];
    const slow = (...args: [string, unknown, AbortSignal?]): Promise<string> => {
      signals.push(args[2]);
      return new Promise((resolve) => releases.push(() => resolve('late')));
    };
    server.handle('with', slow);
    server.handle('without', slow, { signal: false });
    server.handle('echo', (_from, body) => body);
    for (const name of ['with', 'without']) {
      const ac = new AbortController();
      const reply = client.request(peer.id, name, null, { signal: ac.signal });
      await waitFor(() => releases.length === (name === 'with' ? 1 : 2), 2_000, `${name} running`);
      ac.abort();
      await expect(reply).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    }
    // Replies on a lane are ordered: once the echo is back, both CANCELs were applied.
    expect(await client.request(peer.id, 'echo', 1)).toBe(1);
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[1]).toBeUndefined();
    for (const release of releases) release();
    expect(await client.request(peer.id, 'echo', 2)).toBe(2);
    // Neither handler replied after its cancel (a reply would have come back before the echo, late).
    expect(client.stats().lateReplies).toBe(0);
  });

  it('reserves the 16 batch names and validates names', async () => {
    const m = await memNode();
    expect(() => m.on('_stream_batch', () => {})).toThrow(/reserved/);
    expect(() => m.handle('_stream_batch.15', () => 1)).toThrow(/reserved/);
    expect(() => m.on('', () => {})).toThrow(LanemuxError);
    expect(() => m.on('x'.repeat(256), () => {})).toThrow(LanemuxError);
    m.on('_stream_batch.16', () => {}); // not reserved
    expect(() => m.on('_stream_batch.16', () => {})).toThrow(/already registered/);
    expect(() => m.registerBatchHandler(16, () => {})).toThrow(LanemuxError);
    const other = await memNode();
    const peer = await other.connect(m.addresses[0] as string);
    await expect(other.send(peer.id, 0, '_stream_batch.3', new Uint8Array(1))).rejects.toMatchObject({
      code: 'ERR_INVALID_HANDLER',
    });
  });
});

describe('links', () => {
  it('negotiates lanes as min(ours, theirs)', async () => {
    const server = await tcpNode({ lanes: 3 });
    const client = await tcpNode({ lanes: 8 }, false);
    const peer = await client.connect(server.addresses[0] as string);
    expect(peer.lanes).toBe(3);
    expect(server.peers()[0]?.lanes).toBe(3);
  });

  it('delivers what the acceptor sends from onPeer before the dialler finished its own hello', async () => {
    const server = await tcpNode({ lanes: 8 });
    const client = await tcpNode({ lanes: 8 }, false);
    const got: number[][] = Array.from({ length: 8 }, () => []);
    for (let lane = 0; lane < 8; lane++) client.registerBatchHandler(lane, (_f, l, p) => got[l]?.push(p[0] as number));
    server.onPeer((p) => {
      for (let i = 0; i < 20; i++)
        for (let lane = 0; lane < 8; lane++) void server.sendBatch(p.id, lane, Uint8Array.of(i));
    });
    await client.connect(server.addresses[0] as string);
    await waitFor(() => got.every((l) => l.length === 20), 2_000, 'early batches');
    for (const l of got) expect(l).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('refuses a peer that speaks another protocol version, with no retry storm', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ protocolVersion: PROTOCOL_VERSION + 1 }, false);
    await expect(client.connect(server.addresses[0] as string)).rejects.toMatchObject({ code: 'ERR_VERSION_MISMATCH' });
    expect(server.peers()).toEqual([]);

    const wsServer = await createMessenger({ transports: [webSocketServerTransport({ port: 0 })], healthCheck: false });
    open.push(wsServer);
    const wsClient = await createMessenger({
      transports: [
        webSocketClientTransport({ WebSocket: WebSocket as never, minReconnectionDelay: 5, reconnectionJitter: 0 }),
      ],
      healthCheck: false,
      protocolVersion: PROTOCOL_VERSION + 1,
    });
    open.push(wsClient);
    const err = await wsClient.connect(wsServer.addresses[0] as string, { timeoutMs: 2_000 }).catch((e: unknown) => e);
    expect(isLanemuxError(err, 'ERR_VERSION_MISMATCH')).toBe(true);
    expect((err as Error).message).toContain(`v${PROTOCOL_VERSION}`);
  });

  it('refuses to connect to itself', async () => {
    const m = await tcpNode();
    await expect(m.connect(m.addresses[0] as string)).rejects.toMatchObject({ code: 'ERR_HANDSHAKE' });
  });

  it('a live link is not displaced by another process claiming its worker id; once it is dead, the restarted worker gets in with a new epoch', async () => {
    const server = await memNode();
    const workerId = 0xabcdef0123456789n;
    const c1 = await memNode({ workerId });
    await c1.connect(server.addresses[0] as string);
    const first = server.peers()[0];
    const c2 = await memNode({ workerId });
    // c1 answers the check the claim triggers: c2 is refused, retryable, and c1's link stays.
    const refused = await c2.connect(server.addresses[0] as string).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'ERR_WORKER_ID_IN_USE', retryable: true });
    // A ping after the refusal returns after the check's answer (same lane, in order).
    await server.ping(first!.id);
    expect(server.peers().map((p) => p.epoch)).toEqual([first?.epoch]);
    // The first process goes away: the restarted one (same worker id, new instance) now links.
    const gone = nextGone(server);
    await c1.close();
    await within(gone, 2_000, 'old link gone');
    const again = nextPeer(server);
    await c2.connect(server.addresses[0] as string);
    const p = await within(again, 2_000, 'new link');
    expect(p.id).toBe(workerId.toString(16));
    expect(p.epoch).toBeGreaterThan(first?.epoch ?? 0);
    expect(server.peers().length).toBe(1);
    expect(server.stats().refused.worker_id_in_use).toBe(1);
  });

  it('refuses peers beyond maxPeers', async () => {
    const server = await memNode({ maxPeers: 1 });
    const a = await memNode();
    const b = await memNode();
    await a.connect(server.addresses[0] as string);
    await expect(b.connect(server.addresses[0] as string)).rejects.toMatchObject({ code: 'ERR_TOO_MANY_PEERS' });
  });

  it('disconnect() reports the peer gone on both sides', async () => {
    const server = await memNode();
    const client = await memNode();
    const peer = await client.connect(server.addresses[0] as string);
    const remote = nextGone(server);
    const local = nextGone(client);
    client.disconnect(peer.id, 'bye');
    expect((await local).code).toBe('ERR_CLOSED');
    expect((await remote).code).toBe('ERR_PEER_GONE');
    expect(client.peer(peer.id)).toBeUndefined();
    // With a LanemuxError, its code is what both sides report.
    const again = await client.connect(server.addresses[0] as string);
    const remote2 = nextGone(server);
    const local2 = nextGone(client);
    client.disconnect(again.id, new LanemuxError('ERR_HEALTH_CHECK_FAILED', 'mux ping failed'));
    expect((await local2).code).toBe('ERR_HEALTH_CHECK_FAILED');
    expect((await remote2).code).toBe('ERR_HEALTH_CHECK_FAILED');
  });

  it('connect fails clearly for unknown schemes, refused ports and aborts', async () => {
    const m = await tcpNode({}, false);
    await expect(m.connect('quic://127.0.0.1:1')).rejects.toMatchObject({ code: 'ERR_UNSUPPORTED_ADDRESS' });
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as net.AddressInfo).port;
    await new Promise<void>((r) => blocker.close(() => r()));
    await expect(m.connect(`tcp://127.0.0.1:${port}`)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    await expect(m.connect(`tcp://127.0.0.1:${port}`, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'ERR_ABORTED',
    });
  });

  it('validates options with a clear ERR_INVALID_CONFIG', async () => {
    await expect(createMessenger({ transports: [memoryTransport({ network })], lanes: 17 })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
    await expect(createMessenger({ transports: [] })).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' });
    expect(() => tcpTransport({ port: 70000 })).toThrow(/port/);
  });
});

/** A TCP proxy in front of `target` whose links can be cut (RST) or silenced (partition). */
async function proxy(
  target: string,
): Promise<{ address: string; cut(): void; silence(): void; close(): Promise<void> }> {
  const url = new URL(target);
  const pairs: Array<[net.Socket, net.Socket]> = [];
  let silent = false;
  const server = net.createServer((inbound) => {
    const outbound = net.connect({ host: url.hostname, port: Number(url.port) });
    pairs.push([inbound, outbound]);
    for (const [a, b] of [
      [inbound, outbound],
      [outbound, inbound],
    ] as const) {
      a.on('error', () => {});
      a.on('data', (chunk) => {
        if (!silent) b.write(chunk);
      });
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: `tcp://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => {
      for (const [a, b] of pairs) {
        a.resetAndDestroy();
        b.resetAndDestroy();
      }
    },
    silence: () => {
      silent = true;
    },
    close: () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('peer loss over real TCP', () => {
  it('reports a peer whose connection is reset gone at once', async () => {
    const server = await tcpNode({ lanes: 4 });
    const client = await tcpNode({ lanes: 4 }, false);
    const p = await proxy(server.addresses[0] as string);
    try {
      const peer = await client.connect(p.address);
      const gone = nextGone(client);
      const t0 = performance.now();
      p.cut();
      const e = await within(gone, 3_000, 'gone after reset');
      expect(e.code).toBe('ERR_PEER_GONE');
      expect(e.epoch).toBe(peer.epoch);
      // At once, not after a health check (which this node would run only after its 5 s default
      // interval); the slack is for timer lag on a loaded machine.
      expect(performance.now() - t0).toBeLessThan(1_500);
    } finally {
      await p.close();
    }
  });

  it('reports a partitioned peer (no FIN, no RST, nothing) gone within the health-check bound', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ healthCheck: { intervalMs: 100, timeoutMs: 150 } }, false);
    const p = await proxy(server.addresses[0] as string);
    try {
      await client.connect(p.address);
      const gone = nextGone(client);
      const t0 = performance.now();
      p.silence();
      const e = await within(gone, 3_000, 'gone after partition');
      expect(e.code).toBe('ERR_HEALTH_CHECK_FAILED');
      // interval + timeout, with slack for timer lag on a loaded machine.
      expect(performance.now() - t0).toBeLessThan(100 + 150 + 1_500);
    } finally {
      await p.close();
    }
  });
});

describe('health check', () => {
  it('checks only the peers the filter selects, and fails pending requests retryably', async () => {
    const server = await memNode();
    server.handle('hang', () => new Promise(() => {}));
    let selected = false;
    const client = await memNode({ healthCheck: { intervalMs: 30, timeoutMs: 60, filter: () => selected } });
    const peer = await client.connect(server.addresses[0] as string);
    const atServer = server.peers()[0]?.id as string;
    server.pause(atServer);
    // Not selected: nothing happens even though the peer is stalled.
    await new Promise((r) => setTimeout(r, 200));
    expect(client.peer(peer.id)).toBeDefined();
    const pending = client.request(peer.id, 'hang', null).catch((e: unknown) => e);
    const gone = nextGone(client);
    selected = true;
    const e = await within(gone, 1_000, 'gone after selection');
    expect(e.code).toBe('ERR_HEALTH_CHECK_FAILED');
    expect(await pending).toMatchObject({ code: 'ERR_PEER_GONE', retryable: true });
  });
});
