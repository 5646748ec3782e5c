// Over real TCP sockets: a link dialled with `reconnect` comes back by itself when its socket dies,
// as the same peer (same worker id, same instance), and streams can be opened on it again. A proxy
// between the two nodes plays the network: it cuts both sides, or only the dialler's (the acceptor
// then holds a half-open socket, and the re-dial's claim token is what lets it in at once).
import { afterEach, describe, expect, it } from 'vitest';
import type { PeerStateEvent, PeerStateType } from '../../src/messenger/types.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { readAll } from '../support/read-all.ts';
import { closeAll, tcpNode } from './helpers.ts';
import { closeProxies, tcpProxy } from '../support/tcp-proxy.ts';

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    await closeProxies();
  }
});

/** The next event of `node` of type `type`. */
function next(node: LanemuxNode, type: PeerStateType): Promise<PeerStateEvent> {
  return new Promise((resolve) => {
    const off = node.onPeerState((e) => {
      if (e.type !== type) return;
      off();
      resolve(e);
    });
  });
}

const fast = { initialDelayMs: 20, jitterMs: 20 };

function portOf(node: LanemuxNode): number {
  return Number(new URL(node.address.replace('tcp://', 'http://')).port);
}

describe('reconnect over TCP', () => {
  it('a destroyed socket comes back by itself as the same peer, and a stream opens on the new link', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ listen: false });
    const net0 = await tcpProxy(portOf(server));
    const seen: string[] = [];
    client.onPeerState((e) => seen.push(e.type));
    const serverSeen: PeerStateEvent[] = [];
    server.onPeerState((e) => serverSeen.push(e));
    const id = await client.connect(net0.address, { reconnect: fast });

    const resumed = next(client, 'resumed');
    net0.cut();
    const back = await resumed;
    expect(back.peer).toBe(id);
    expect(await client.ready(net0.address)).toBe(id);
    expect(seen).toEqual(['up', 'down', 'reconnecting', 'resumed']);
    await expect.poll(() => serverSeen.map((e) => e.type)).toEqual(['up', 'down', 'resumed']);
    expect(new Set(serverSeen.map((e) => e.instanceId)).size).toBe(1);

    const anchor = server.createAnchor<string>();
    const sender = await client.attachAnchor<string>(anchor.handle);
    await sender.send('after the cut');
    await sender.finalize();
    expect(await readAll(anchor)).toEqual(['after the cut']);
  });

  it('the acceptor still holds the half-open socket: the re-dial’s claim token supersedes it at once, no refusal', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ listen: false });
    const net0 = await tcpProxy(portOf(server));
    const id = await client.connect(net0.address, { reconnect: fast });
    const serverDown = next(server, 'down');
    const serverResumed = next(server, 'resumed');
    const resumed = next(client, 'resumed');
    net0.severDialler();
    expect((await resumed).peer).toBe(id);
    // The acceptor learnt of the loss only from the new link superseding the old one.
    expect((await serverDown).error?.message).toContain('superseded');
    const onServer = await serverResumed;
    expect(onServer.peer).toBe(client.workerId.toString(16).padStart(16, '0'));
    const refused = Object.entries(server.metrics()).find(([k]) => k.includes('reason="worker_id_in_use"'));
    expect(refused?.[1]).toBe(0);
    // The severed acceptor-side socket is released by closeProxies().
  });

  it('many cuts in a row: the link comes back after each, and the peer id never changes', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ listen: false });
    const net0 = await tcpProxy(portOf(server));
    const id = await client.connect(net0.address, { reconnect: { initialDelayMs: 5, jitterMs: 5, factor: 1 } });
    for (let i = 0; i < 10; i++) {
      const resumed = next(client, 'resumed');
      net0.cut();
      expect((await resumed).peer).toBe(id);
    }
    expect(await client.ready(net0.address, { timeoutMs: 2_000 })).toBe(id);
  });
});
