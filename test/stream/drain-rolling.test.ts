// A rolling restart with resume on: two server nodes A and B behind one client. The client has
// streams on A both ways; A drains — its streams finish, through a lost link that resume carries
// them across — while the client's new streams go to B; then A closes and restarts, and the client's
// next streams go to the restarted A. No token of the streams that finished draining is lost.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import { formatHandle } from '../../src/stream/handle.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { DrainHarness, collect, numbered, peerIdOf } from '../support/drain-harness.ts';

let h: DrainHarness;
beforeEach(() => {
  h = new DrainHarness();
});
afterEach(async () => {
  await h.closeAll();
});

const TOKENS = 30;

/** Send tokens `from` … `to - 1` of a stream named `name`. */
async function sendRange(sender: StreamSender<string>, name: string, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i++) await sender.send(`${name}${i}`);
}

/** One "request": the client's anchor, which `server` streams tokens into. */
async function request(
  client: LanemuxNode,
  server: LanemuxNode,
): Promise<{ anchor: StreamAnchor<string>; sender: StreamSender<string>; read: ReturnType<typeof collect<string>> }> {
  const anchor = client.createAnchor<string>();
  const sender = await h.drive(server.attachAnchor<string>(anchor.handle));
  return { anchor, sender, read: collect(anchor) };
}

describe('a rolling restart behind one client', () => {
  it('A drains (its streams finish across a lost link), closes and restarts; new streams go to B, then to the new A', async () => {
    const a = await h.node('a');
    const b = await h.node('b');
    const client = await h.node(null);
    // The client's router: any server that has not said it drains.
    const servers = new Map<string, LanemuxNode>([
      [peerIdOf(a), a],
      [peerIdOf(b), b],
    ]);
    const drainingPeers = new Set<string>();
    const seen: string[] = [];
    client.onPeerState((e) => {
      seen.push(`${e.peer === peerIdOf(a) ? 'a' : 'b'}:${e.type}`);
      if (e.type === 'draining') drainingPeers.add(e.peer);
      // Another instance of the worker (a restart) takes streams again.
      if (e.type === 'up') drainingPeers.delete(e.peer);
    });
    const pick = (): LanemuxNode => [...servers].find(([peer]) => !drainingPeers.has(peer))![1];
    await h.drive(client.connect('memory://a'));
    await h.drive(client.connect('memory://b'));

    // Streams on A: 8 from A to the client, 4 from the client into anchors A reads; 10 tokens each so far.
    const down = await Promise.all(Array.from({ length: 8 }, () => request(client, a)));
    const upAnchors = Array.from({ length: 4 }, () => a.createAnchor<string>());
    const upSenders = await h.drive(Promise.all(upAnchors.map((x) => client.attachAnchor<string>(x.handle))));
    const upReads = upAnchors.map((x) => collect(x));
    await h.tick(Promise.all(down.map((s, i) => sendRange(s.sender, `d${i}.`, 0, 10))));
    await h.tick(Promise.all(upSenders.map((s, i) => sendRange(s, `u${i}.`, 0, 10))));

    // A drains. The client hears it and routes its next request to B.
    const drained = a.drain({ timeout: 120_000 });
    await h.rt.runMacrotasks();
    expect(seen).toContain('a:draining');
    expect(pick()).toBe(b);
    const onB = await request(client, pick());
    // A's own application refuses new work, and the client fails new streams toward A at once.
    await expect(h.drive(request(client, a))).rejects.toMatchObject({ code: 'ERR_DRAINING', retryable: true });
    expect(() => a.createAnchor()).toThrow(expect.objectContaining({ code: 'ERR_DRAINING' }));
    const onA = formatHandle({ workerId: a.workerId, localId: 7n });
    await expect(h.drive(client.attachAnchor(onA))).rejects.toMatchObject({ code: 'ERR_DRAINING', retryable: true });

    // The network blinks mid-drain: every stream is suspended and resumed on the new links.
    await h.tick(Promise.all(down.map((s, i) => sendRange(s.sender, `d${i}.`, 10, 15))));
    h.cut();
    await h.rt.runMacrotasks();
    await h.drive(client.connect('memory://a'));
    await h.drive(client.connect('memory://b'));

    // Every stream on A finishes during the drain.
    const writes = [
      ...down.map(async (s, i) => {
        await sendRange(s.sender, `d${i}.`, 15, TOKENS);
        await s.sender.finalize();
      }),
      ...upSenders.map(async (s, i) => {
        await sendRange(s, `u${i}.`, 10, TOKENS);
        await s.finalize();
      }),
      (async () => {
        await sendRange(onB.sender, 'b.', 0, TOKENS);
        await onB.sender.finalize();
      })(),
    ];
    await h.tick(Promise.all(writes));
    const downResults = await h.tick(Promise.all(down.map((s) => s.read)));
    const upResults = await h.tick(Promise.all(upReads));
    downResults.forEach((r, i) => expect(r).toEqual({ items: numbered(TOKENS, `d${i}.`), error: null }));
    upResults.forEach((r, i) => expect(r).toEqual({ items: numbered(TOKENS, `u${i}.`), error: null }));
    expect(await h.tick(onB.read)).toEqual({ items: numbered(TOKENS, 'b.'), error: null });
    expect(client.metrics()['velo_streaming_resumed_streams_total']).toBeGreaterThan(0);
    // A's 8 senders and 4 anchors all finished; none had to be ended.
    expect(await h.tick(drained)).toEqual({ finished: 12, ended: 0 });

    // A closes and restarts as a new instance of the same worker at the same address.
    await h.drive(a.close());
    await h.rt.runMacrotasks();
    expect(seen).toContain('a:gone');
    const a2 = await h.node('a', { workerId: a.workerId });
    servers.set(peerIdOf(a2), a2);
    await h.drive(client.connect('memory://a'));
    expect(drainingPeers.size).toBe(0);
    expect(pick()).toBe(a2);
    const onNewA = await request(client, a2);
    await h.tick(
      (async () => {
        await sendRange(onNewA.sender, 'n.', 0, TOKENS);
        await onNewA.sender.finalize();
      })(),
    );
    expect(await h.tick(onNewA.read)).toEqual({ items: numbered(TOKENS, 'n.'), error: null });
    expect(seen.filter((e) => e.startsWith('a:'))).toEqual([
      'a:up',
      'a:draining',
      'a:down',
      'a:resumed',
      'a:draining',
      'a:down',
      'a:gone',
      'a:up',
    ]);
  });
});
