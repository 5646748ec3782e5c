/**
 * Worker-id claims from the dialling side, eviction order and crossed dials: the node we dial cannot
 * take over another peer's worker id, a refused `authenticate` evicts nobody, a link with work in
 * flight is never the one evicted, and two nodes that dial each other at once still end with one
 * link, with or without `authenticate`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import type net from 'node:net';
import { decodeGoaway } from '../../src/transport/hello.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { rawPeer } from './raw-peer.ts';

const open: Messenger[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const m of open.splice(0)) await m.close();
});

async function node(extra: Partial<MessengerOptions> = {}, listen = true): Promise<Messenger> {
  const m = await createMessenger({
    transports: [tcpTransport({ listen, closeGraceMs: 100 })],
    healthCheck: false,
    ...extra,
  });
  open.push(m);
  return m;
}

describe('claims from the dialling side and eviction order', () => {
  it('a node we dial that claims the worker id of another live peer is refused; the live peer keeps its link and its identity', async () => {
    const victim = await node({ authenticate: (r) => r.credential ?? null });
    victim.handle('who', () => 'victim');
    const honest = await node({ workerId: 0x77n, credential: 'h' });
    honest.handle('who', () => 'honest');
    await honest.connect(victim.addresses[0]!);
    const attacker = await node({ workerId: 0x77n });
    attacker.handle('who', () => 'ATTACKER');
    await expect(victim.connect(attacker.addresses[0]!)).rejects.toMatchObject({ code: 'ERR_WORKER_ID_IN_USE' });
    expect(victim.peer('0000000000000077')?.identity).toBe('h');
    expect(await victim.request('0000000000000077', 'who', null)).toBe('honest');
  });

  it('a HELLO that authenticate refuses evicts no idle link at maxPeers', async () => {
    const server = await node({
      maxPeers: 1,
      authenticate: (r) => (r.credential === 'ok' ? 'ok' : null),
      healthCheck: { intervalMs: 30, timeoutMs: 5_000 },
    });
    const idle = await node({ credential: 'ok' }, false);
    await idle.connect(server.addresses[0]!);
    const gone: string[] = [];
    idle.onPeerGone((e) => gone.push(e.code));
    await new Promise((r) => setTimeout(r, 100)); // the idle link becomes evictable (a few quiet ticks)
    const bad = await node({ credential: 'nope' }, false);
    await expect(bad.connect(server.addresses[0]!)).rejects.toMatchObject({ code: 'ERR_UNAUTHENTICATED' });
    expect(gone).toEqual([]);
    expect(server.peers().length).toBe(1);
  });

  it('a link with a request in flight is never the one evicted for a new peer', async () => {
    const server = await node({ maxPeers: 1, healthCheck: { intervalMs: 30, timeoutMs: 5_000 } });
    let release!: () => void;
    server.handle('slow', () => new Promise<string>((r) => (release = () => r('done'))));
    const working = await node({}, false);
    const peer = await working.connect(server.addresses[0]!);
    const pending = working.request(peer.id, 'slow', null, { timeoutMs: 5_000 });
    await new Promise((r) => setTimeout(r, 150)); // quiet ticks pass while the handler runs
    const newcomer = await node({}, false);
    await expect(newcomer.connect(server.addresses[0]!)).rejects.toMatchObject({ code: 'ERR_TOO_MANY_PEERS' });
    release();
    await expect(pending).resolves.toBe('done');
  });

  it('authenticate calls in flight are capped at maxHandshakes, counting those of evicted connections until they settle', async () => {
    let calls = 0;
    // A verifier that never answers: every call stays in flight.
    const server = await node({ maxHandshakes: 2, authenticate: () => (calls++, new Promise<string>(() => {})) });
    await rawPeer(server.addresses[0]!, sockets, { worker: '0000000000000081' });
    await rawPeer(server.addresses[0]!, sockets, { worker: '0000000000000082' });
    while (calls < 2) await new Promise((r) => setTimeout(r, 5));
    // A third HELLO evicts the oldest waiting connection, but its call is still running: refused.
    const third = await rawPeer(server.addresses[0]!, sockets, { worker: '0000000000000083' });
    await third.closed;
    expect(decodeGoaway(third.frames.find((f) => f[0] === 0xf1)!)).toMatchObject({
      code: 'ERR_TOO_MANY_PEERS',
      message: /authentications are in flight/,
    });
    expect(calls).toBe(2);
  });

  for (const auth of [false, true]) {
    it(`two nodes that dial each other at once end with one link on both sides${auth ? ', with authenticate' : ''}`, async () => {
      const extra = auth ? { authenticate: (r: { credential: string | undefined }) => r.credential ?? null } : {};
      const a = await node({ ...extra, credential: 'a' });
      const b = await node({ ...extra, credential: 'b' });
      const results = await Promise.allSettled([a.connect(b.addresses[0]!), b.connect(a.addresses[0]!)]);
      // Whichever survives, each side has exactly one link to the other, and it works.
      await new Promise((r) => setTimeout(r, 50));
      expect(a.peers().length).toBe(1);
      expect(b.peers().length).toBe(1);
      a.handle('ping', () => 'pong');
      expect(await b.request(a.self.id, 'ping', null)).toBe('pong');
      expect(results.some((r) => r.status === 'fulfilled')).toBe(true);
    });
  }
});
