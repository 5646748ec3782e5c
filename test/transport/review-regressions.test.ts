// Regressions for the second transport/messenger review (protocol and lifecycle defects).
import { createHook } from 'node:async_hooks';
import net from 'node:net';
import { Decoder, encode } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger, PeerGoneEvent } from '../../src/messenger/types.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { decodeGoaway, decodeHello, encodeGoaway, encodeHello } from '../../src/transport/hello.ts';
import { CACHED_DECODE_LIMIT, MAX_DEPTH, SHARED_ENCODER_KEEP, checkShape, decodeBounded, encodeShared } from '../../src/wire/msgpack.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/transport/memory.ts';
import { tcpTransport } from '../../src/transport/node-tcp.ts';
import { PROTOCOL_VERSION } from '../../src/transport/port.ts';
import { GOAWAY_CLOSE_GRACE_MS } from '../../src/transport/transport.ts';
import { webSocketClientTransport } from '../../src/transport/websocket.ts';
import { webSocketServerTransport } from '../../src/transport/ws-server.ts';
import { nextGone, waitFor, within } from './helpers.ts';
import { messengerFixture, rawPeer } from './raw-peer.ts';

const { open, sockets, tcpMessenger: tcpNode } = messengerFixture(afterEach);

function nested(size: number, unit: readonly number[]): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i + unit.length <= size; i += unit.length) b.set(unit, i);
  return b;
}

describe('MessagePack pre-scan (item 1)', () => {
  it('refuses array16 and map16 nesting bombs quickly, before the decoder allocates', () => {
    for (const unit of [[0xdc, 0x3e, 0x80], [0xde, 0x3e, 0x80, 0x01], [0xdd, 0, 1, 0, 0]]) {
      const b = nested(256 * 1024, unit);
      const heap = process.memoryUsage().heapUsed;
      const t0 = performance.now();
      expect(() => checkShape(b)).toThrow(/MessagePack container declares \d+ items at byte \d+, more than the \d+ bytes left/);
      expect(() => decodeBounded(b)).toThrow(RangeError);
      expect(performance.now() - t0).toBeLessThan(200);
      expect(process.memoryUsage().heapUsed - heap).toBeLessThan(16 * 1024 * 1024);
    }
  });

  it(`bounds nesting at ${MAX_DEPTH}`, () => {
    let v: unknown = 1;
    for (let i = 0; i < MAX_DEPTH; i++) v = [v];
    expect(decodeBounded(encode(v))).toEqual(v);
    expect(() => decodeBounded(encode([v]))).toThrow(`MessagePack nesting deeper than ${MAX_DEPTH}`);
    // Nothing leaks between calls: a shallow value decodes right after a refusal.
    expect(decodeBounded(encode({ a: [1, [2]] }))).toEqual({ a: [1, [2]] });
  });

  it('accepts every valid encoding and refuses truncated, trailing and invalid input', () => {
    const samples: unknown[] = [
      null, true, false, 0, 1, -1, 127, -33, 2 ** 40, -(2 ** 40), 1.5, '', 'é', 'x'.repeat(300), 'y'.repeat(70_000),
      new Uint8Array(0), new Uint8Array(300), new Uint8Array(70_000), [], {}, [[], {}, [[[]]]],
      { code: 'ERR_X', message: 'm', retryable: false }, { a: [1, 2, { b: new Uint8Array(70) }], c: 'é' },
      Array.from({ length: 20 }, (_, i) => i), Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
      2n ** 63n, -(2n ** 63n), new Date(1_700_000_000_123),
    ];
    for (const s of samples) {
      const bytes = encode(s, { useBigInt64: true });
      expect(() => checkShape(bytes)).not.toThrow();
      expect(decodeBounded(bytes)).toEqual(s);
    }
    for (const bad of [[], [0x91], [0x92, 1], [0xc4, 5, 1], [1, 2], [0xc1], [0xdd, 0xff, 0xff, 0xff, 0xff, 1], [0xcb, 0, 0]]) {
      expect(() => checkShape(Uint8Array.from(bad)), JSON.stringify(bad)).toThrow(RangeError);
    }
  });

  it('never refuses what the decoder accepts (random short inputs)', () => {
    const bias = [0x90, 0x91, 0x92, 0x81, 0xa1, 0xc4, 0x01, 0x00, 0xdc, 0xc0, 0xd4, 0xc7];
    let seed = 12345;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x80000000;
    };
    const plain = new Decoder({ useBigInt64: true });
    for (let i = 0; i < 20_000; i++) {
      const b = new Uint8Array(1 + Math.floor(rnd() * 12));
      for (let j = 0; j < b.length; j++) b[j] = rnd() < 0.5 ? Math.floor(rnd() * 256) : (bias[Math.floor(rnd() * bias.length)] as number);
      let decodable = true;
      try {
        plain.decode(b);
      } catch {
        decodable = false;
      }
      if (decodable) expect(() => checkShape(b), Buffer.from(b).toString('hex')).not.toThrow();
    }
  });
});

describe('MessagePack buffers are not kept forever (item 8)', () => {
  it('replaces the shared encoder after a result over the keep limit', () => {
    const big = encodeShared('x'.repeat(SHARED_ENCODER_KEEP + 10));
    expect(big.byteLength).toBeGreaterThan(SHARED_ENCODER_KEEP);
    const small = encodeShared(1);
    // Before the fix the small result was a view of the same (large) shared buffer.
    expect(small.buffer).not.toBe(big.buffer);
    expect(small.buffer.byteLength).toBeLessThan(SHARED_ENCODER_KEEP);
    expect(Array.from(small)).toEqual([1]);
    // Below the limit the encoder (and its buffer) is reused.
    const again = encodeShared(2);
    expect(again.buffer).toBe(encodeShared(3).buffer);
  });

  it('decodes inputs above the cached-decoder limit correctly (fresh decoder each time)', () => {
    const body = new Uint8Array(CACHED_DECODE_LIMIT * 2).fill(7);
    const bytes = encode({ body });
    expect(decodeBounded(bytes)).toEqual({ body });
    expect(decodeBounded(encode('small'))).toBe('small');
  });
});

describe('close() of the dialling side (item 2)', () => {
  for (const kind of ['tcp', 'memory'] as const) {
    it(`delivers every message admitted on lane 0 before close() (${kind})`, async () => {
      const network = createMemoryNetwork();
      const node = async (listen: boolean): Promise<Messenger> => {
        const transports = kind === 'tcp' ? [tcpTransport({ listen, closeGraceMs: 2_000 })] : [memoryTransport({ network, listen, admissionLimit: 64 * 1024 * 1024 })];
        const m = await createMessenger({ transports, healthCheck: false });
        open.push(m);
        return m;
      };
      const server = await node(true);
      const client = await node(false);
      let got = 0;
      server.on('x', () => {
        got++;
      });
      const peer = await client.connect(server.addresses[0]!);
      let admitted = 0;
      for (let i = 0; i < 2_000; i++) if (client.send(peer.id, 0, 'x', new Uint8Array(400)) === true) admitted++;
      expect(admitted).toBe(2_000);
      await client.close();
      await waitFor(() => server.peers().length === 0, 5_000, 'the server to see the link end');
      expect(got).toBe(2_000);
    });
  }
});

describe('concurrent connect() calls to one address (item 4)', () => {
  it("one caller's abort does not fail another caller's connect", async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    const ac = new AbortController();
    const first = b.connect(a.addresses[0]!, { signal: ac.signal });
    const second = b.connect(a.addresses[0]!);
    ac.abort();
    await expect(first).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    const peer = await within(second, 5_000, 'the second connect');
    expect(peer.id).toBe(a.self.id);
    expect(b.peers().map((p) => p.id)).toEqual([a.self.id]);
  });

  it("one caller's timeout does not fail another caller's connect", async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    // A proxy that holds connections until released, so the dial is pending when the first times out.
    const held: Array<() => void> = [];
    let releasing = false;
    const target = new URL(a.addresses[0]!);
    const proxy = net.createServer((inbound) => {
      sockets.push(inbound);
      inbound.on('error', () => {});
      inbound.pause();
      const go = (): void => {
        const outbound = net.connect({ host: target.hostname, port: Number(target.port) });
        sockets.push(outbound);
        outbound.on('error', () => {});
        inbound.pipe(outbound).pipe(inbound);
        inbound.resume();
      };
      if (releasing) go();
      else held.push(go);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    try {
      const address = `tcp://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
      const first = b.connect(address, { timeoutMs: 50 });
      const second = b.connect(address, { timeoutMs: 5_000 });
      await expect(first).rejects.toMatchObject({ code: 'ERR_CONNECT' });
      await waitFor(() => held.length === 1, 5_000, 'the held connection');
      releasing = true;
      held.splice(0).forEach((go) => go());
      expect((await within(second, 5_000, 'the second connect')).id).toBe(a.self.id);
    } finally {
      const closed = new Promise<void>((r) => proxy.close(() => r()));
      for (const s of sockets.splice(0)) s.destroy();
      await closed;
    }
  });

  it('when every caller gives up, the dial stops and a later connect starts afresh', async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    const ac1 = new AbortController();
    const ac2 = new AbortController();
    const p1 = b.connect(a.addresses[0]!, { signal: ac1.signal });
    const p2 = b.connect(a.addresses[0]!, { signal: ac2.signal });
    ac1.abort();
    ac2.abort();
    await expect(p1).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await expect(p2).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    expect(b.peers()).toEqual([]);
    expect((await b.connect(a.addresses[0]!)).id).toBe(a.self.id);
  });
});

describe('WebSocket server pre-HELLO limit (item 5)', () => {
  it('closes with 1009 as soon as a first message passes 4 KiB, without buffering up to maxMessageSize', async () => {
    const a = await createMessenger({ transports: [webSocketServerTransport()], healthCheck: false, maxMessageSize: 64 * 1024 * 1024 });
    open.push(a);
    const ws = new WebSocket(a.addresses[0]!);
    try {
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      ws.on('error', () => {});
      const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
      let isClosed = false;
      void closed.then(() => {
        isClosed = true;
      });
      // One unfinished message in 1 MiB fragments: before the fix ws buffered all 48 MiB of it.
      const chunk = Buffer.alloc(1024 * 1024, 0xf0);
      let sent = 0;
      for (; sent < 48 && !isClosed && ws.readyState === WebSocket.OPEN; sent++) {
        await new Promise<void>((r) => ws.send(chunk, { binary: true, fin: false }, () => r()));
      }
      expect(await within(closed, 5_000, 'the server closing the socket')).toBe(1009);
      expect(sent).toBeLessThanOrEqual(4);
    } finally {
      ws.terminate();
    }
  });
});

describe('crossed dials (item 6)', () => {
  for (const lanes of [1, 4]) {
    it(`two nodes connect()ing to each other at once keep exactly one link (tcp, ${lanes} lane(s))`, async () => {
      for (let round = 0; round < 10; round++) {
        const a = await tcpNode({ lanes });
        const b = await tcpNode({ lanes });
        for (const m of [a, b]) m.handle('who', () => m.self.id);
        const gone: string[] = [];
        a.onPeerGone((e) => gone.push(e.code));
        b.onPeerGone((e) => gone.push(e.code));
        const [pa, pb] = await within(Promise.all([a.connect(b.addresses[0]!), b.connect(a.addresses[0]!)]), 5_000, 'both connects');
        expect(pa.id).toBe(b.self.id);
        expect(pb.id).toBe(a.self.id);
        await waitFor(() => a.peers().length === 1 && b.peers().length === 1, 5_000, 'one link on each side');
        expect(await a.request(b.self.id, 'who', null)).toBe(b.self.id);
        expect(await b.request(a.self.id, 'who', null)).toBe(a.self.id);
        expect(a.peers().length).toBe(1);
        expect(b.peers().length).toBe(1);
        expect(a.lanes(b.self.id)).toBe(lanes);
        // Only the duplicate (never the survivor) was closed.
        expect(gone.every((c) => c === 'ERR_DUPLICATE_LINK')).toBe(true);
        await Promise.all(open.splice(0).map((m) => m.close()));
      }
    });
  }

  it('a HELLO from another instance claiming the worker id of a live, answering link is refused (retryable) and the live link stays', async () => {
    const a = await tcpNode();
    const b1 = await tcpNode({ workerId: 7n, instanceId: 'first' }, false);
    await b1.connect(a.addresses[0]!);
    await waitFor(() => a.peers().length === 1);
    const b2 = await tcpNode({ workerId: 7n, instanceId: 'second' }, false);
    await expect(b2.connect(a.addresses[0]!)).rejects.toMatchObject({ code: 'ERR_WORKER_ID_IN_USE', retryable: true });
    // The check it triggered was answered (a later ping returns after it): the first link is still the one.
    await a.ping(a.peers()[0]!.id);
    expect(a.peers().map((p) => p.instanceId)).toEqual(['first']);
  });
});

describe('WebSocket client leaves nothing pending after close (item 7)', () => {
  it('a dial waiting to reconnect keeps no timer alive once the messenger is closed', async () => {
    // Every timer created during the test; afterwards none may still be pending and keep the process alive.
    interface TimerLike {
      hasRef(): boolean;
      _destroyed?: boolean;
      _idleTimeout?: number;
    }
    const created: TimerLike[] = [];
    const hook = createHook({
      init(_id, type, _trigger, resource) {
        if (type === 'Timeout') created.push(resource as TimerLike);
      },
    });
    const alive = (): TimerLike[] => created.filter((t) => t.hasRef() && t._destroyed !== true && (t._idleTimeout ?? -1) >= 0);
    hook.enable();
    try {
      const server = await createMessenger({ transports: [webSocketServerTransport({ closeGraceMs: 200 })], healthCheck: false });
      const client = await createMessenger({
        transports: [webSocketClientTransport({ WebSocket: WebSocket as never, minReconnectionDelay: 20_000, reconnectionJitter: 0 })],
        healthCheck: false,
      });
      open.push(server, client);
      await client.connect(server.addresses[0]!);
      const gone = nextGone(client);
      server.disconnect(client.self.id);
      await within(gone, 5_000, 'the client seeing the server drop it');
      // The dial now waits 20 s before reconnecting. Closing must cancel that wait.
      await client.close();
      await server.close();
      // Close handshakes finish within a few ms; after that nothing pending may remain.
      await waitFor(() => alive().length === 0, 2_000, 'no pending ref\'d timers');
      expect(alive()).toEqual([]);
    } finally {
      hook.disable();
    }
  });
});

describe('GOAWAY on an established link (item 9)', () => {
  const MESSAGE_TOK = (text: string): Uint8Array => Uint8Array.from([0x02, 3, 0x74, 0x6f, 0x6b, ...Buffer.from(text)]);

  async function server(lanes = 1): Promise<{ a: Messenger; got: string[]; gone: Promise<PeerGoneEvent> }> {
    const a = await tcpNode({ lanes });
    const got: string[] = [];
    a.on('tok', (_from, lane, payload) => got.push(`${lane}:${Buffer.from(payload).toString()}`));
    return { a, got, gone: nextGone(a) };
  }

  it('is the last message of its lane and closes the link even if the peer keeps the socket open', async () => {
    const { a, got, gone } = await server();
    const raw = await rawPeer(a.addresses[0]!, sockets);
    await waitFor(() => a.peers().length === 1, 5_000, 'the raw peer established');
    raw.send(MESSAGE_TOK('before'));
    raw.send(encodeGoaway(new TransportError('ERR_CLOSED', 'bye')));
    raw.send(MESSAGE_TOK('after'));
    const e = await within(gone, 5_000, 'the link closing');
    expect(e.code).toBe('ERR_PEER_GONE');
    expect(e.reason).toContain('bye');
    await within(raw.closed, 5_000, 'our side closing the socket');
    expect(got).toEqual(['0:before']);
  });

  it('with several lanes, ends only its lane and closes the link after the grace period', async () => {
    const { a, got, gone } = await server(2);
    const hello = { worker: 'abcdefabcdefabcd', instance: 'raw', session: 9, lanes: 2 };
    const lane0 = await rawPeer(a.addresses[0]!, sockets, { ...hello, lane: 0 });
    await waitFor(() => lane0.frames.length === 1, 5_000, 'the lane-0 answer');
    const lane1 = await rawPeer(a.addresses[0]!, sockets, { ...hello, lane: 1 });
    await waitFor(() => a.peers().length === 1, 5_000, 'the two-lane raw peer established');
    const t0 = performance.now();
    lane0.send(encodeGoaway(new TransportError('ERR_CLOSED', 'bye')));
    lane0.send(MESSAGE_TOK('dropped'));
    lane1.send(MESSAGE_TOK('still delivered'));
    await waitFor(() => got.length === 1, 5_000, 'the lane-1 message');
    expect(got).toEqual(['1:still delivered']);
    expect((await within(gone, 5_000, 'the grace-period close')).reason).toContain('bye');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(GOAWAY_CLOSE_GRACE_MS - 50);
    expect(got).toEqual(['1:still delivered']);
  });

  it('a GOAWAY that does not decode closes the link with ERR_MALFORMED_ENVELOPE', async () => {
    const { a, got, gone } = await server();
    const raw = await rawPeer(a.addresses[0]!, sockets);
    await waitFor(() => a.peers().length === 1, 5_000, 'the raw peer established');
    raw.send(Uint8Array.from([0xf1, 0xc1]));
    raw.send(MESSAGE_TOK('after'));
    expect((await within(gone, 5_000, 'the link closing')).code).toBe('ERR_MALFORMED_ENVELOPE');
    await within(raw.closed, 5_000, 'the socket closing');
    const goaway = raw.frames.find((f) => f[0] === 0xf1);
    expect(goaway === undefined ? undefined : decodeGoaway(goaway).code).toBe('ERR_MALFORMED_ENVELOPE');
    expect(got).toEqual([]);
  });
});

describe('HELLO session range (item 11, protocol.md §3.1)', () => {
  it('accepts sessions up to 2^53-1 whether sent as uint64 or as float64, and sends them as uint64', () => {
    const base = { protocolVersion: PROTOCOL_VERSION, worker: '0123456789abcdef', instance: 'a1', lane: 0, lanes: 1, maxMessageSize: 1 << 20, keys: [] };
    for (const session of [0, 1, 0xffffffff, 2 ** 32, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
      const bytes = encodeHello({ ...base, session });
      const h = decodeHello(bytes, PROTOCOL_VERSION);
      expect(h, String(session)).toMatchObject({ session });
      if (session > 0xffffffff) expect(Array.from(bytes)).toContain(0xcf);
      // The same map with the session as an integral float64, as some encoders write it.
      const body = encode({ worker: base.worker, instance: 'a1', session: session + 0.0, lane: 0, lanes: 1, maxMessageSize: 1 << 20, keys: [] }, { forceIntegerToFloat: true });
      const asFloat = new Uint8Array([...bytes.subarray(0, 6), ...body]);
      expect(decodeHello(asFloat, PROTOCOL_VERSION), `float ${session}`).toMatchObject({ session });
    }
    const tooBig = encode({ worker: base.worker, instance: 'a1', session: 2n ** 53n, lane: 0, lanes: 1, maxMessageSize: 1 << 20, keys: [] }, { useBigInt64: true });
    expect(decodeHello(new Uint8Array([...encodeHello({ ...base, session: 1 }).subarray(0, 6), ...tooBig]), PROTOCOL_VERSION)).toMatchObject({ code: 'ERR_MALFORMED_ENVELOPE' });
  });

  it('a peer dialling with a session above 2^32-1 is answered with the same session', async () => {
    const a = await tcpNode();
    const raw = await rawPeer(a.addresses[0]!, sockets, { session: 2 ** 40 });
    await waitFor(() => raw.frames.length >= 1, 5_000, 'the HELLO answer');
    expect(decodeHello(raw.frames[0]!, PROTOCOL_VERSION)).toMatchObject({ session: 2 ** 40, worker: a.self.id });
    await waitFor(() => a.peers().length === 1, 5_000, 'the link');
  });
});
