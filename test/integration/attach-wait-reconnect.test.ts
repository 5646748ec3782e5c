import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readAll } from '../support/read-all.ts';
import { closeAll, tcpNode } from './helpers.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';

const sockets = new Set<net.Socket>();
const proxies: net.Server[] = [];
afterEach(async () => {
  await closeAll();
  for (const s of sockets) s.destroy();
  for (const p of proxies.splice(0)) await new Promise<void>((r) => p.close(() => r()));
});
async function proxy(target: number) {
  const server = net.createServer((front) => {
    const back = net.connect(target, '127.0.0.1');
    sockets.add(front).add(back);
    front.pipe(back);
    back.pipe(front);
    front.on('error', () => {});
    back.on('error', () => {});
    front.on('close', () => back.destroy());
    back.on('close', () => front.destroy());
  });
  proxies.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: `tcp://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
  };
}
const portOf = (n: LanemuxNode) => Number(new URL(n.address.replace('tcp://', 'http://')).port);
describe('scratch', () => {
  it('attach and ticket open wait for a reconnecting link', async () => {
    const server = await tcpNode();
    const client = await tcpNode({ listen: false });
    const p = await proxy(portOf(server));
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
    const p = await proxy(portOf(server));
    await client.connect(p.address);
    const a = server.createAnchor<string>();
    const downs = new Promise<void>((r) => client.onPeerState((e) => e.type === 'down' && r()));
    p.cut();
    await downs;
    await expect(client.attachAnchor<string>(a.handle)).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER' });
    a.cancel?.();
  });
});
