/**
 * The attacks that used to succeed, each against a real victim node over real sockets, with honest
 * streams flowing beside the attacker: the attack is refused or contained, the honest streams are
 * exact and uninterrupted, and the victim's memory stays bounded (printed, and asserted loosely: the
 * failures these tests guard against were gigabytes or a dead process).
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { PROTOCOL_VERSION } from '../../src/transport/port.ts';
import { encodeHello } from '../../src/transport/hello.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
const messengers: Messenger[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const n of nodes.splice(0)) await n.close();
  for (const m of messengers.splice(0)) await m.close();
});

async function node(options: Parameters<typeof createNode>[0]): Promise<LanemuxNode> {
  const n = await createNode(options);
  nodes.push(n);
  return n;
}

/** Resident memory figures of this (the victim's) process, in MB. */
function memory(): { heap: number; arrayBuffers: number; rss: number } {
  const m = process.memoryUsage();
  return { heap: m.heapUsed / 2 ** 20, arrayBuffers: m.arrayBuffers / 2 ** 20, rss: m.rss / 2 ** 20 };
}

function report(label: string, before: ReturnType<typeof memory>, after: ReturnType<typeof memory>): void {
  const f = (x: number): string => x.toFixed(1);
  console.log(
    `[attack] ${label}: heap ${f(before.heap)} → ${f(after.heap)} MB, arrayBuffers ${f(before.arrayBuffers)} → ${f(after.arrayBuffers)} MB, rss ${f(before.rss)} → ${f(after.rss)} MB`,
  );
}

/** Honest traffic: `streams` streams of `tokens` tokens from `producer` to `consumer`; resolves with every stream's tokens. */
async function honestStreams(
  consumer: LanemuxNode,
  producer: LanemuxNode,
  streams: number,
  tokens: number,
): Promise<string[][]> {
  const anchors = Array.from({ length: streams }, () => consumer.createAnchor<string>());
  const reads = anchors.map((a) => readAll(a));
  await Promise.all(
    anchors.map(async (a, s) => {
      const sender = await producer.attachAnchor<string>(a.handle);
      for (let i = 0; i < tokens; i++) {
        await sender.send(`s${s}-t${i}`);
        if (i % 16 === 15) await new Promise((r) => setImmediate(r));
      }
      await sender.finalize();
    }),
  );
  return Promise.all(reads);
}

function expected(streams: number, tokens: number): string[][] {
  return Array.from({ length: streams }, (_, s) => Array.from({ length: tokens }, (_, i) => `s${s}-t${i}`));
}

describe('attack: one small Data record that made the decoder reserve gigabytes', () => {
  it('an Item of nested array16 headers ends only its own stream with ERR_DESERIALIZATION; 32 honest streams beside it are exact', async () => {
    const victim = await node({ transports: [tcpTransport({ port: 0 })] });
    const honest = await node({ transports: [tcpTransport({ listen: false })] });
    // The attacker is a producer the victim's application handed a handle to; its messenger rewrites
    // one bytes item in flight into the hostile body (same length: 2,001 array16 headers, 6 KB).
    const attackerMessenger = await createMessenger({
      transports: [tcpTransport({ listen: false })],
      transportKeys: ['messenger-mux-v2'],
    });
    messengers.push(attackerMessenger);
    const send = attackerMessenger.sendBatch.bind(attackerMessenger);
    const N = 6_000;
    attackerMessenger.sendBatch = (peer, lane, payload, options) => {
      for (let i = 0; i + 3 + N <= payload.byteLength; i++) {
        if (
          payload[i] === 0xc5 &&
          payload[i + 1] === N >>> 8 &&
          payload[i + 2] === (N & 0xff) &&
          payload[i + 3] === 0xab &&
          payload[i + 3 + N - 1] === 0xab
        ) {
          for (let k = i; k < i + 3 + N; k += 3) payload.set([0xdc, 0xff, 0xff], k);
          break;
        }
      }
      return send(peer, lane, payload, options);
    };
    const attacker = await node({ messenger: attackerMessenger });
    await honest.connect(victim.address!);
    await attacker.connect(victim.address!);
    const before = memory();
    const target = victim.createAnchor<unknown>();
    const targetRead = (async () => {
      try {
        for await (const _ of target) void _;
        return 'ended';
      } catch (e) {
        return (e as { code?: string }).code;
      }
    })();
    const traffic = honestStreams(victim, honest, 32, 200);
    const bad = await attacker.attachAnchor<unknown>(target.handle);
    await bad.send(new Uint8Array(N).fill(0xab));
    attacker.flushBatch();
    expect(await targetRead).toBe('ERR_DESERIALIZATION');
    expect(await traffic).toEqual(expected(32, 200));
    const after = memory();
    report('nested-array Item', before, after);
    expect(after.heap - before.heap).toBeLessThan(64);
  });
});

describe('attack: a HELLO that claims another live node’s worker id', () => {
  it('is refused and never displaces the live link: the frontend’s 32 streams stay exact, the engine’s next attaches still reach the frontend', async () => {
    const engine = await node({ transports: [tcpTransport({ port: 0 })] });
    const frontend = await node({ transports: [tcpTransport({ listen: false })] });
    await frontend.connect(engine.address!);
    // Streams from the engine to the frontend: the frontend creates anchors, the engine attaches.
    const anchors = Array.from({ length: 32 }, () => frontend.createAnchor<string>());
    const reads = anchors.map((a) => readAll(a));
    const senders = await Promise.all(anchors.map((a) => engine.attachAnchor<string>(a.handle)));
    for (let i = 0; i < 50; i++) for (const [s, snd] of senders.entries()) await snd.send(`s${s}-t${i}`);
    // The impostor names the frontend's worker id (the first 16 hex digits of any of its handles).
    const impostorWorker = frontend.workerId.toString(16).padStart(16, '0');
    const url = new URL(engine.address!);
    for (let attempt = 0; attempt < 5; attempt++) {
      const socket = net.connect({ host: url.hostname, port: Number(url.port) });
      sockets.push(socket);
      socket.on('error', () => {});
      socket.resume();
      await new Promise<void>((r) => socket.once('connect', r));
      const hello = encodeHello({
        protocolVersion: PROTOCOL_VERSION,
        worker: impostorWorker,
        instance: `impostor-${attempt}`,
        session: 1 + attempt,
        lane: 0,
        lanes: 1,
        maxMessageSize: 1 << 20,
        keys: ['messenger-mux-v2'],
        claim: '',
      });
      const f = Buffer.alloc(4 + hello.byteLength);
      f.writeUInt32BE(hello.byteLength, 0);
      f.set(hello, 4);
      socket.write(f);
      await new Promise<void>((r) => socket.once('close', () => r()));
    }
    for (let i = 50; i < 100; i++) for (const [s, snd] of senders.entries()) await snd.send(`s${s}-t${i}`);
    await Promise.all(senders.map((s) => s.finalize()));
    expect(await Promise.all(reads)).toEqual(expected(32, 100));
    // The engine's next attach for the frontend goes to the frontend, not the impostor.
    const next = frontend.createAnchor<string>();
    const nextRead = readAll(next);
    const sender = await engine.attachAnchor<string>(next.handle);
    await sender.send('after');
    await sender.finalize();
    expect(await nextRead).toEqual(['after']);
    expect(engine.metrics()['velo_messenger_connections_refused_total{reason="worker_id_in_use"}']).toBe(5);
  });
});

describe('attack: sockets that never finish a hello, and links that only said HELLO', () => {
  it('300 silent sockets and a full house of HELLO-only links do not lock an honest peer out; its streams are exact', async () => {
    const victim = await createMessenger({
      transports: [tcpTransport({ port: 0, closeGraceMs: 100 })],
      maxPeers: 32,
      maxHandshakes: 256,
      healthCheck: { intervalMs: 100, timeoutMs: 5_000 },
    });
    messengers.push(victim);
    const url = new URL(victim.addresses[0]!);
    const open = (): Promise<net.Socket> =>
      new Promise((r) => {
        const s = net.connect({ host: url.hostname, port: Number(url.port) });
        sockets.push(s);
        s.on('error', () => {});
        s.once('connect', () => r(s));
      });
    // 32 links that send one valid HELLO and then nothing but PONGs (they answer health checks, so
    // only the idle-link eviction can free their places).
    let pong = 0;
    for (let i = 0; i < 32; i++) {
      const s = await open();
      const hello = encodeHello({
        protocolVersion: PROTOCOL_VERSION,
        worker: (0x5000 + i).toString(16).padStart(16, '0'),
        instance: 'idle',
        session: 1,
        lane: 0,
        lanes: 1,
        maxMessageSize: 1 << 20,
        keys: [],
      });
      const f = Buffer.alloc(4 + hello.byteLength);
      f.writeUInt32BE(hello.byteLength, 0);
      f.set(hello, 4);
      s.write(f);
      let buf = Buffer.alloc(0);
      s.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
          const m = buf.subarray(4, 4 + buf.readUInt32BE(0));
          buf = buf.subarray(4 + buf.readUInt32BE(0));
          // PING (0x07, u32 id) → PONG (0x08, the same id): docs/protocol.md §4.4.
          if (m[0] === 0x07 && m.length === 5) {
            pong++;
            const pong_ = Buffer.from(m);
            pong_[0] = 0x08;
            const pongMsg = pong_;
            const out = Buffer.alloc(4 + pongMsg.length);
            out.writeUInt32BE(pongMsg.length, 0);
            pongMsg.copy(out, 4);
            s.write(out);
          }
        }
      });
    }
    await new Promise<void>((r) => {
      const t = setInterval(() => {
        if (victim.peers().length === 32) {
          clearInterval(t);
          r();
        }
      }, 5);
    });
    // 300 sockets that never send a byte (more than maxHandshakes).
    const silent = await Promise.all(Array.from({ length: 300 }, open));
    const before = memory();
    const client = await createMessenger({ transports: [tcpTransport({ listen: false })], healthCheck: false });
    messengers.push(client);
    victim.handle('echo', (_f, b) => b);
    let peer: Awaited<ReturnType<typeof client.connect>> | undefined;
    for (let attempt = 0; peer === undefined; attempt++) {
      peer = await client.connect(victim.addresses[0]!).catch((e: { code?: string }) => {
        if (e.code !== 'ERR_TOO_MANY_PEERS' || attempt > 100) throw e;
        return new Promise<undefined>((r) => setTimeout(() => r(undefined), 20));
      });
    }
    for (let i = 0; i < 100; i++) expect(await client.request(peer.id, 'echo', i)).toBe(i);
    expect(pong).toBeGreaterThan(0); // the idle links really answered their checks
    const stats = victim.stats().refused;
    expect(stats.handshake_evicted).toBeGreaterThanOrEqual(300 - 256);
    expect(stats.link_evicted).toBeGreaterThanOrEqual(1);
    report('silent sockets + idle links', before, memory());
    void silent;
  });
});
