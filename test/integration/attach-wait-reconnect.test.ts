// Over real TCP: while a link is being re-dialled, attachAnchor and openAnchorStream wait for it (bounded) instead
// of failing ERR_UNKNOWN_PEER at once; without a re-dial they still fail at once.
import { afterEach, describe, expect, it } from 'vitest';
import { readAll } from '../support/read-all.ts';
import { closeAll, tcpNode } from './helpers.ts';
import { closeProxies, tcpProxy } from '../support/tcp-proxy.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    await closeProxies();
  }
});
const portOf = (n: LanemuxNode) => Number(new URL(n.address.replace('tcp://', 'http://')).port);
describe('attach and open wait for a link that is re-dialling', () => {
  it('attach and ticket open wait for a reconnecting link', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ listen: false });
    const p = await tcpProxy(portOf(server));
    await client.connect(p.address, { reconnect: { initialDelayMs: 300, jitterMs: 0 } });
    const a = server.createAnchor<string>();
    const b = server.createAnchor<string>();
    const ticket = server.prebindAnchor(b)!;
    const downs = new Promise<void>((r) => client.onPeerState((e) => e.type === 'reconnecting' && r()));
    p.cut();
    await downs;
    const t0 = performance.now();
    const [s1, s2] = await Promise.all([
      client.attachAnchor<string>(a.handle),
      client.openAnchorStream<string>(b.handle, ticket),
    ]);
    expect(performance.now() - t0).toBeGreaterThan(200);
    await s1.send('x');
    await s1.finalize();
    await s2.send('y');
    await s2.finalize();
    expect(await readAll(a)).toEqual(['x']);
    expect(await readAll(b)).toEqual(['y']);
  });
  it('without reconnect the attach fails at once', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ listen: false });
    const p = await tcpProxy(portOf(server));
    await client.connect(p.address);
    const a = server.createAnchor<string>();
    const downs = new Promise<void>((r) => client.onPeerState((e) => e.type === 'down' && r()));
    p.cut();
    await downs;
    await expect(client.attachAnchor<string>(a.handle)).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER' });
    a.cancel?.();
  });
});
