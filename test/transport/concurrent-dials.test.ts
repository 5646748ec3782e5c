// Several dials toward one peer at once: concurrent connect() calls to one address share a dial
// without one caller's abort or timeout failing another, and crossed dials keep exactly one link.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { messengerFixture } from './raw-peer.ts';

const { open, sockets, tcpMessenger: tcpNode } = messengerFixture(afterEach);

describe('concurrent connect() calls to one address', () => {
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

describe('crossed dials and worker-id claims', () => {
  for (const lanes of [1, 4]) {
    it(`two nodes connect()ing to each other at once keep exactly one link (tcp, ${lanes} lane(s))`, async () => {
      for (let round = 0; round < 10; round++) {
        const a = await tcpNode({ lanes });
        const b = await tcpNode({ lanes });
        for (const m of [a, b]) m.handle('who', () => m.self.id);
        const gone: string[] = [];
        a.onPeerGone((e) => gone.push(e.code));
        b.onPeerGone((e) => gone.push(e.code));
        const [pa, pb] = await within(
          Promise.all([a.connect(b.addresses[0]!), b.connect(a.addresses[0]!)]),
          5_000,
          'both connects',
        );
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
