/**
 * `authenticate` on the Node server adapters (TCP, ws-server, memory) through the shared suite, and
 * the transport rules around it: the worker id of an authenticated link is bound to its identity,
 * the lanes of a link join only with the claim token of its lane-0 answer.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { webSocketClientTransport, type WebSocketConstructor } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { PROTOCOL_VERSION } from '../../src/transport/port.ts';
import { decodeGoaway, decodeHello } from '../../src/transport/hello.ts';
import { authSuite } from './auth-suite.ts';
import { waitFor } from '../support/wait-for.ts';
import { rawPeer } from './raw-peer.ts';

const network = createMemoryNetwork();
const fastWs = {
  WebSocket: WebSocket as unknown as WebSocketConstructor,
  minReconnectionDelay: 20,
  reconnectionJitter: 20,
  maxReconnectionDelay: 100,
};

describe('authenticate on Node TCP', () => {
  authSuite({
    name: 'tcp',
    upgrade: false,
    reconnects: false,
    server: (authenticate) => tcpTransport({ authenticate, closeGraceMs: 100 }),
    client: (credential) => tcpTransport({ listen: false, credential, closeGraceMs: 100 }),
  });
});

describe('authenticate on the ws server (ws), partysocket client', () => {
  authSuite({
    name: 'ws-server',
    upgrade: true,
    reconnects: true,
    server: (authenticate) => webSocketServerTransport({ authenticate, closeGraceMs: 100 }),
    client: (credential) => webSocketClientTransport({ ...fastWs, credential }),
  });
});

describe('authenticate on the memory transport', () => {
  authSuite({
    name: 'memory',
    upgrade: false,
    reconnects: false,
    server: (authenticate) => memoryTransport({ network, authenticate }),
    client: (credential) => memoryTransport({ network, listen: false, credential }),
  });
});

const open: Messenger[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const m of open.splice(0)) await m.close();
});

async function tcpNode(
  extra: Parameters<typeof createMessenger>[0] extends infer O ? Partial<O> : never,
  listen = true,
): Promise<Messenger> {
  const m = await createMessenger({
    transports: [tcpTransport({ listen, closeGraceMs: 100 })],
    healthCheck: false,
    ...extra,
  });
  open.push(m);
  return m;
}

describe('worker ids and identities', () => {
  it('with authenticate, a HELLO claiming a live worker id under another identity is refused; the live link keeps working', async () => {
    const server = await tcpNode({ authenticate: (r) => r.credential ?? null });
    server.handle('echo', (_f, b) => b);
    const honest = await tcpNode({ workerId: 0x42n, credential: 'alice' }, false);
    const peer = await honest.connect(server.addresses[0]!);
    const impostor = await tcpNode({ workerId: 0x42n, credential: 'mallory' }, false);
    await expect(impostor.connect(server.addresses[0]!)).rejects.toMatchObject({ code: 'ERR_WORKER_ID_IN_USE' });
    expect(await honest.request(peer.id, 'echo', 'ok')).toBe('ok');
    expect(server.peers().map((p) => p.identity)).toEqual(['alice']);
    expect(server.stats().refused.worker_id_in_use).toBe(1);
  });

  it('with authenticate, the same identity under the same worker id (a restarted process) supersedes its old link', async () => {
    const server = await tcpNode({ authenticate: (r) => r.credential ?? null });
    const first = await tcpNode({ workerId: 0x43n, instanceId: 'one', credential: 'svc' }, false);
    await first.connect(server.addresses[0]!);
    const gone = new Promise<string>((r) => server.onPeerGone((e) => r(e.reason)));
    const second = await tcpNode({ workerId: 0x43n, instanceId: 'two', credential: 'svc' }, false);
    await second.connect(server.addresses[0]!);
    expect(await gone).toMatch(/superseded/);
    expect(server.peers().map((p) => p.instanceId)).toEqual(['two']);
  });

  it('without authenticate, a dead link whose peer restarted is found by the check the new HELLO triggers, and the retry gets in', async () => {
    const server = await tcpNode({});
    // The "old process": a raw socket that completed a HELLO and then went silent (half-open).
    const ghost = await rawPeer(server.addresses[0]!, sockets, {
      worker: '0000000000000044',
      instance: 'old',
      session: 9,
      claim: '',
    });
    await waitFor(() => server.peers().length === 1, 5_000, 'ghost linked');
    const restarted = await tcpNode({ workerId: 0x44n, instanceId: 'new' }, false);
    await expect(restarted.connect(server.addresses[0]!)).rejects.toMatchObject({
      code: 'ERR_WORKER_ID_IN_USE',
      retryable: true,
    });
    // The ghost does not answer the check: its link is closed, and the retry links.
    await ghost.closed;
    await restarted.connect(server.addresses[0]!);
    expect(server.peers().map((p) => p.instanceId)).toEqual(['new']);
  });

  it('the same process reconnecting presents the claim token of its last link and supersedes it at once', async () => {
    const server = await tcpNode({});
    const client = await tcpNode({ workerId: 0x45n }, false);
    const peer = await client.connect(server.addresses[0]!);
    // Drop our side only (as a lost network would); the server still holds the old link.
    client.disconnect(peer.id, 'blink');
    const again = await client.connect(server.addresses[0]!);
    expect(again.id).toBe(peer.id);
    await waitFor(
      () => server.peers().length === 1 && server.stats().refused.worker_id_in_use === 0,
      5_000,
      'one link',
    );
  });

  it('a lane that does not present the claim token of its lane-0 answer cannot join the link being formed', async () => {
    const server = await createMessenger({
      transports: [tcpTransport({ closeGraceMs: 100 })],
      healthCheck: false,
      lanes: 2,
    });
    open.push(server);
    const worker = '0000000000000046';
    const hello = {
      protocolVersion: PROTOCOL_VERSION,
      worker,
      instance: 'i',
      session: 77,
      lanes: 2,
      maxMessageSize: 1 << 20,
      keys: [] as string[],
    };
    const lane0 = await rawPeer(server.addresses[0]!, sockets, { ...hello, lane: 0, claim: '' });
    await waitFor(() => lane0.frames.length === 1, 5_000, 'lane-0 answer');
    const answer = decodeHello(lane0.frames[0]!, PROTOCOL_VERSION);
    expect(answer).toMatchObject({ lanes: 2 });
    const token = (answer as { claim?: string }).claim;
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    // An attacker who knows the worker, instance and session but not the token:
    const intruder = await rawPeer(server.addresses[0]!, sockets, { ...hello, lane: 1, claim: '0'.repeat(32) });
    await intruder.closed;
    expect(decodeGoaway(intruder.frames.find((f) => f[0] === 0xf1)!).message).toMatch(/claim token/);
    expect(server.peers()).toEqual([]);
  });
});
