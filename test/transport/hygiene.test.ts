/**
 * Connection hygiene: links that carry nothing are health-checked and closed when dead or idle past
 * a bound, and at `maxPeers` the link idle longest makes room for a new peer, so sockets that only
 * said HELLO can never lock new peers out.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { waitFor } from '../support/wait-for.ts';
import { rawPeer } from './raw-peer.ts';

const open: Messenger[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const m of open.splice(0)) await m.close();
});

async function node(extra: Partial<MessengerOptions>, listen = true): Promise<Messenger> {
  const m = await createMessenger({ transports: [tcpTransport({ listen, closeGraceMs: 100 })], ...extra });
  open.push(m);
  return m;
}

describe('connection hygiene', () => {
  it('links that sent one HELLO and then nothing fail their health check and free their places: a new peer gets in', async () => {
    const server = await node({ maxPeers: 3, healthCheck: { intervalMs: 50, timeoutMs: 100 } });
    // Raw sockets that send one valid HELLO and then nothing (they never answer a PING).
    const ghosts = await Promise.all(
      [1, 2, 3].map((i) => rawPeer(server.addresses[0]!, sockets, { worker: i.toString(16).padStart(16, '0') })),
    );
    await waitFor(() => server.peers().length === 3, 5_000, 'three silent links');
    await Promise.all(ghosts.map((g) => g.closed));
    const honest = await node({ healthCheck: false }, false);
    server.handle('echo', (_f, b) => b);
    const peer = await honest.connect(server.addresses[0]!);
    expect(await honest.request(peer.id, 'echo', 1)).toBe(1);
  });

  it('at maxPeers, the link idle longest is evicted (ERR_EVICTED, retryable) to admit a new peer; a busy link is never the one', async () => {
    // Long health timeout: the idle peers answer their checks; only eviction can free a place.
    const server = await node({ maxPeers: 2, healthCheck: { intervalMs: 40, timeoutMs: 5_000 }, idleTimeoutMs: 0 });
    server.handle('echo', (_f, b) => b);
    const idle = await node({ healthCheck: false }, false);
    const busy = await node({ healthCheck: false }, false);
    const idlePeer = await idle.connect(server.addresses[0]!);
    const busyPeer = await busy.connect(server.addresses[0]!);
    const goneAtIdle = new Promise<string>((r) => idle.onPeerGone((e) => r(e.code)));
    // Keep one link busy while the other sits idle for a few ticks.
    const stop = { now: false };
    const traffic = (async () => {
      while (!stop.now) await busy.request(busyPeer.id, 'echo', 'x');
    })();
    // Refused (retryable) until the idle link has sat idle for two health-check ticks; then admitted.
    const newcomer = await node({ healthCheck: false }, false);
    let peer: Awaited<ReturnType<typeof newcomer.connect>> | undefined;
    for (let attempt = 0; peer === undefined; attempt++) {
      peer = await newcomer.connect(server.addresses[0]!).catch((e: { code?: string }) => {
        if (e.code !== 'ERR_TOO_MANY_PEERS' || attempt > 200) throw e;
        return new Promise<undefined>((r) => setTimeout(() => r(undefined), 20));
      });
    }
    expect(await newcomer.request(peer.id, 'echo', 2)).toBe(2);
    expect(await goneAtIdle).toBe('ERR_EVICTED');
    stop.now = true;
    await traffic;
    expect(
      server
        .peers()
        .map((p) => p.id)
        .sort(),
    ).toEqual([busy.self.id, newcomer.self.id].sort());
    expect(server.stats().refused.link_evicted).toBe(1);
    void idlePeer;
  });

  it('a link that carries nothing past idleTimeoutMs is closed with ERR_IDLE; one with traffic stays', async () => {
    const server = await node({ healthCheck: { intervalMs: 30, timeoutMs: 5_000 }, idleTimeoutMs: 150 });
    server.handle('echo', (_f, b) => b);
    const quiet = await node({ healthCheck: false }, false);
    const chatty = await node({ healthCheck: false }, false);
    await quiet.connect(server.addresses[0]!);
    const chattyPeer = await chatty.connect(server.addresses[0]!);
    const gone = new Promise<string>((r) => quiet.onPeerGone((e) => r(e.reason)));
    let stop = false;
    const traffic = (async () => {
      while (!stop) {
        await chatty.request(chattyPeer.id, 'echo', 'x');
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    expect(await gone).toMatch(/carried nothing/);
    stop = true;
    await traffic;
    expect(server.peers().map((p) => p.id)).toEqual([chatty.self.id]);
    expect(server.stats().idleClosed).toBe(1);
  });
});
