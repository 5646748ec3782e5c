// Half-sent frames must not pin memory: one behavioural suite run against every byte-stream adapter
// (Node TCP under vitest, Deno and Bun TCP under deno test / bun test, test/runtimes/*/frames.*.ts).
// Links that announce 1 MiB frames and stall are raw node:net sockets (every runtime has node:net);
// the honest peer is a real node streaming tokens to the victim all along.
import net from 'node:net';
import { expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { IncompleteFramePool, type FramePolicy } from '../../src/transport/frame-pool.ts';
import { decodeGoaway, encodeHello } from '../../src/transport/hello.ts';
import { PROTOCOL_VERSION, type TransportAdapter } from '../../src/transport/port.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/constants.ts';

export interface FrameBoundsHarness {
  /** Adapter name, for test titles. */
  readonly name: string;
  /** A listening adapter of this runtime on a free loopback port. */
  server(): TransportAdapter;
  /** A dialling adapter of this runtime. */
  client(): TransportAdapter;
  /** Stalling links in the main test. */
  readonly attackers: number;
  /** Bytes of ArrayBuffers the process holds now (Node: `process.memoryUsage().arrayBuffers`), printed. */
  memory?(): number;
  /** Collect garbage before a memory reading, where the runtime lets us. */
  gc?(): Promise<void>;
}

const MIB = 1024 * 1024;
/** What the honest peer's own split frames may hold in the shared pool at any instant (small batches). */
const HONEST_SLACK = 64 * 1024;

/** The adapter, handed `policy` as a node would hand its own (the messenger does not expose one). */
export function withPolicy(adapter: TransportAdapter, policy: FramePolicy): TransportAdapter {
  return {
    name: adapter.name,
    dialSchemes: adapter.dialSchemes,
    listen: (host) => adapter.listen({ ...host, framePolicy: policy }),
    dial: (request, events) => adapter.dial({ ...request, framePolicy: policy }, events),
    close: () => adapter.close(),
  };
}

async function until(pred: () => boolean, what: string, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A raw link: TCP connect, lane-0 HELLO, then whatever the test writes. */
interface Stalling {
  readonly socket: net.Socket;
  readonly frames: Uint8Array[];
  closedAt: number;
  firstByteAt: number;
}

async function stallingLink(address: string, i: number): Promise<Stalling> {
  const u = new URL(address);
  const socket = net.connect({ host: u.hostname, port: Number(u.port) });
  socket.on('error', () => {});
  const link: Stalling = { socket, frames: [], closedAt: 0, firstByteAt: 0 };
  socket.once('close', () => (link.closedAt = performance.now()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let buf = new Uint8Array(0);
  socket.on('data', (chunk: Uint8Array) => {
    const all = new Uint8Array(buf.byteLength + chunk.byteLength);
    all.set(buf);
    all.set(chunk, buf.byteLength);
    buf = all;
    while (buf.byteLength >= 4) {
      const n = new DataView(buf.buffer, buf.byteOffset).getUint32(0);
      if (buf.byteLength < 4 + n) break;
      link.frames.push(buf.slice(4, 4 + n));
      buf = buf.subarray(4 + n);
    }
  });
  const hello = encodeHello({
    protocolVersion: PROTOCOL_VERSION,
    worker: (0xa000_0000_0000_0000n + BigInt(i)).toString(16),
    instance: `stall-${i}`,
    session: 1,
    lane: 0,
    lanes: 1,
    maxMessageSize: MIB,
    keys: [],
  });
  socket.write(prefix(hello.byteLength));
  socket.write(hello);
  // The victim's HELLO answer: the link is established and the frame limit is maxMessageSize.
  await until(() => link.frames.length > 0, `HELLO answer to stalling link ${i}`);
  return link;
}

function prefix(n: number): Uint8Array {
  const p = new Uint8Array(4);
  new DataView(p.buffer).setUint32(0, n);
  return p;
}

/** The code of the GOAWAY a stalling link was closed with (its last frame). */
function goawayOf(link: Stalling): { code: string; message: string } | undefined {
  const last = link.frames[link.frames.length - 1];
  if (last === undefined || last[0] !== 0xf1) return undefined;
  const e = decodeGoaway(last);
  return { code: e.code, message: e.message };
}

/** A victim node over `adapter` + policy, and an honest node streaming tokens to one of its anchors. */
async function setup(
  h: FrameBoundsHarness,
  policy: FramePolicy,
  open: { messengers: Messenger[]; nodes: LanemuxNode[] },
) {
  const messenger = await createMessenger({
    transports: [withPolicy(h.server(), policy)],
    healthCheck: false,
    transportKeys: [MESSENGER_MUX_KEY],
  });
  open.messengers.push(messenger);
  const victim = await createNode({ messenger });
  open.nodes.push(victim);
  const honest = await createNode({ transports: [h.client()] });
  open.nodes.push(honest);
  const address = messenger.addresses[0]!;
  await honest.connect(address);
  // The honest peer's link must never go (the stalling links' do, by design).
  const honestId = honest.workerId.toString(16).padStart(16, '0');
  const gone: string[] = [];
  messenger.onPeerGone((e) => {
    if (e.peer === honestId) gone.push(`${e.code}: ${e.reason}`);
  });
  const anchor = victim.createAnchor<string>();
  const sender = await honest.attachAnchor<string>(anchor.handle);
  const received: string[] = [];
  const reading = (async () => {
    for await (const t of anchor) received.push(t);
  })();
  let stop = false;
  let sent = 0;
  const producing = (async () => {
    while (!stop) {
      await sender.send(`token-${sent}`);
      sent++;
      // Yield to I/O now and then: the stalling links are read by this same process.
      if (sent % 16 === 0) await new Promise((r) => setTimeout(r, 0));
    }
    await sender.finalize();
  })();
  return {
    messenger,
    address,
    gone,
    received,
    get sent() {
      return sent;
    },
    /** Stop streaming; resolves when every token is read, checking they are exact and in order. */
    async finish(): Promise<void> {
      stop = true;
      await producing;
      await reading;
      expect(gone).toEqual([]);
      expect(received.length).toBe(sent);
      expect(received.every((t, k) => t === `token-${k}`)).toBe(true);
    },
  };
}

export function frameBoundsSuite(h: FrameBoundsHarness): void {
  const open = { messengers: [] as Messenger[], nodes: [] as LanemuxNode[], links: [] as Stalling[] };
  const closeAll = async (): Promise<void> => {
    for (const l of open.links.splice(0)) l.socket.destroy();
    for (const n of open.nodes.splice(0).reverse()) await n.close();
    for (const m of open.messengers.splice(0)) await m.close();
  };

  it(`${h.name}: ${h.attackers} links announcing 1 MiB frames and stalling one byte short hold only what they sent, within the pool, until the deadline closes them; an honest peer streams through it all, exact`, async () => {
    const deadlineMs = 4_000;
    const policy: FramePolicy = { pool: new IncompleteFramePool(256 * MIB), largeFrameBytes: 64 * 1024, deadlineMs };
    const pool = policy.pool;
    try {
      const v = await setup(h, policy, open);
      const links: Stalling[] = [];
      for (let i = 0; i < h.attackers; i++) {
        const l = await stallingLink(v.address, i);
        links.push(l);
        open.links.push(l);
      }
      await h.gc?.();
      const before = h.memory?.();
      const tokensAtStart = v.sent;
      // One payload buffer shared by every link's writes: the attackers' side adds ~1 MiB, not 100.
      const body = new Uint8Array(MIB - 1).fill(0x5a);
      const head = 100;
      // 1. The header of a 1 MiB frame and 100 bytes: a 4 KiB start each, not 1 MiB.
      const t0 = performance.now();
      for (const l of links) {
        l.firstByteAt = performance.now();
        l.socket.write(prefix(MIB));
        l.socket.write(body.subarray(0, head));
      }
      await until(() => pool.held >= h.attackers * 4096, 'every link reserving its first 4 KiB', deadlineMs);
      expect(pool.held).toBeLessThan(h.attackers * 4096 + HONEST_SLACK);
      const afterHeaders = h.memory?.();
      // 2. All but the last byte.
      for (const l of links) l.socket.write(body.subarray(head));
      const sentBytes = h.attackers * (MIB - 1);
      await until(() => pool.held >= sentBytes, 'every byte sent to be held', deadlineMs);
      // What was sent, and at most the one missing byte per link more (each buffer reached its frame's size).
      expect(pool.held).toBeLessThanOrEqual(sentBytes + h.attackers + HONEST_SLACK);
      expect(pool.held).toBeLessThan(pool.largeLimit);
      expect(links.every((l) => l.closedAt === 0)).toBe(true);
      const peak = h.memory?.();
      const allSentMs = performance.now() - t0;
      const tokensAtPeak = v.sent;
      // 3. The deadline closes every link, with a GOAWAY saying so.
      await until(() => links.every((l) => l.closedAt > 0), 'every stalling link to be closed', deadlineMs + 10_000);
      for (const l of links) {
        expect(goawayOf(l)?.code).toBe('ERR_FRAME_DEADLINE');
        const lived = l.closedAt - l.firstByteAt;
        expect(lived).toBeGreaterThanOrEqual(deadlineMs - 5);
        expect(lived).toBeLessThan(deadlineMs + 5_000);
      }
      expect(goawayOf(links[0]!)?.message).toMatch(
        /frame of 1048576 bytes from tcp:\/\/.* did not complete within 4000 ms of its first byte/,
      );
      expect(pool.held).toBeLessThan(HONEST_SLACK);
      expect(v.messenger.stats().refused.frame_deadline).toBe(h.attackers);
      // The honest stream kept going through every phase, and is exact.
      expect(tokensAtPeak).toBeGreaterThan(tokensAtStart);
      const tokensAtEnd = v.sent;
      expect(tokensAtEnd).toBeGreaterThan(tokensAtPeak);
      await v.finish();
      expect(pool.held).toBe(0);
      await h.gc?.();
      const after = h.memory?.();
      if (before !== undefined && afterHeaders !== undefined && peak !== undefined && after !== undefined) {
        const mb = (n: number): string => `${(n / MIB).toFixed(1)} MiB`;
        console.log(
          `[${h.name}] victim arrayBuffers: before ${mb(before)}, after ${h.attackers} 1 MiB headers ${mb(afterHeaders)} (+${mb(afterHeaders - before)}), ` +
            `all but the last byte sent ${mb(peak)} (+${mb(peak - before)}; pool ${mb(sentBytes + h.attackers)}; ${Math.round(allSentMs)} ms after the headers), ` +
            `after the ${deadlineMs} ms deadline ${mb(after)} (+${mb(after - before)}); ` +
            `honest tokens ${tokensAtEnd}, exact`,
        );
        // Headers alone must not cost the announced sizes (before: +100 MiB at once).
        expect(afterHeaders - before).toBeLessThan(h.attackers * 64 * 1024);
        expect(after - before).toBeLessThan(16 * MIB);
      }
    } finally {
      await closeAll();
    }
  }, 60_000);

  it(`${h.name}: once large frames fill their share of the pool, the link that needs more is closed at once, saying the node's memory for incomplete frames is full; the honest peer is undisturbed and closing the node gives every byte back`, async () => {
    const policy: FramePolicy = {
      pool: new IncompleteFramePool(8 * MIB),
      largeFrameBytes: 64 * 1024,
      deadlineMs: 600_000,
    };
    const pool = policy.pool;
    let sampling: ReturnType<typeof setInterval> | undefined;
    try {
      const v = await setup(h, policy, open);
      const links: Stalling[] = [];
      for (let i = 0; i < 12; i++) {
        const l = await stallingLink(v.address, i);
        links.push(l);
        open.links.push(l);
      }
      const body = new Uint8Array(MIB - 1).fill(0x33);
      let highest = 0;
      sampling = setInterval(() => (highest = Math.max(highest, pool.held)), 1);
      for (const l of links) {
        l.socket.write(prefix(MIB));
        l.socket.write(body);
      }
      // 12 MiB announced into a 6 MiB share: at least 6 links are refused, long before any deadline.
      await until(() => links.filter((l) => l.closedAt > 0).length >= 6, 'links refused by the full pool');
      const refused = links.filter((l) => l.closedAt > 0);
      for (const l of refused) {
        const g = goawayOf(l);
        expect(g?.code).toBe('ERR_FRAME_DEADLINE');
        expect(g?.message).toMatch(
          /the node's memory for incomplete frames is full \(\d+ bytes held, at most 6291456 bytes for large frames, of 8388608\)/,
        );
      }
      // Settled: every link still open holds all it sent (and none is refused later).
      await until(
        () => pool.held >= links.filter((l) => l.closedAt === 0).length * (MIB - 1),
        'the surviving links to hold all they sent',
      );
      clearInterval(sampling);
      highest = Math.max(highest, pool.held);
      // Large frames never took the quarter kept for ordinary frames (the honest peer's may add a little).
      expect(highest).toBeLessThanOrEqual(pool.largeLimit + HONEST_SLACK);
      expect(pool.held).toBeGreaterThan(0);
      await v.finish();
      // Closing the node closes the links still stalling: every reserved byte comes back.
      await closeAll();
      expect(pool.held).toBe(0);
    } finally {
      clearInterval(sampling);
      await closeAll();
    }
  }, 60_000);
}
