// `node.drain()`: the node takes no new streams (locally or from peers: ERR_DRAINING, retryable),
// tells its peers without closing the link, lets every live stream finish and resolves when the last
// one has (and what it handed over is written), and at its deadline ends the rest with ERR_DRAINING on
// both sides. Memory transport on one manual clock: the deadline is hit to the millisecond.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import type { PeerStateEvent } from '../../src/messenger/types.ts';
import { StreamError } from '../../src/stream/errors.ts';
import type { MpscEvent } from '../../src/stream/mpsc-anchor.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { DrainHarness, collect, numbered, peerIdOf, produce, watch } from '../support/drain-harness.ts';

let h: DrainHarness;
beforeEach(() => {
  h = new DrainHarness();
});
afterEach(async () => {
  await h.closeAll();
});

/** A server listening at memory://server and a client linked to it. */
async function serverAndClient(
  options: { server?: Parameters<DrainHarness['node']>[1]; client?: Parameters<DrainHarness['node']>[1] } = {},
): Promise<{ server: LanemuxNode; client: LanemuxNode; events: PeerStateEvent[] }> {
  const server = await h.node('server', options.server);
  const client = await h.node(null, options.client);
  const events: PeerStateEvent[] = [];
  client.onPeerState((e) => events.push(e));
  await h.drive(client.connect('memory://server'));
  return { server, client, events };
}

/** The rejection of `p` (fails the test if it resolves). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
}

const draining = { code: 'ERR_DRAINING', retryable: true };

/** Resolves once `signal` has aborted (at once if it has). */
const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', () => resolve()));

describe('node.drain(): no new streams', () => {
  it('refuses new streams at once, locally and from peers, with a retryable ERR_DRAINING', async () => {
    const { server, client, events } = await serverAndClient();
    const early = server.createAnchor<string>();
    const earlyMpsc = server.createMpscAnchor<string>();
    const clientAnchor = client.createAnchor<string>();
    const drained = server.drain({ timeout: 1_000 });
    expect(server.draining).toBe(true);

    // Local creates and attaches.
    for (const make of [() => server.createAnchor(), () => server.createMpscAnchor()]) {
      let thrown: unknown;
      try {
        make();
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(StreamError);
      expect(thrown).toMatchObject(draining);
    }
    expect(await rejection(server.attachAnchor(clientAnchor.handle))).toMatchObject(draining);

    // Anchors that waited for a sender end now: none may attach any more.
    expect(early.finished).toBe(true);
    expect(earlyMpsc.finished).toBe(true);
    expect((await h.drive(collect(early))).error).toMatchObject({
      ...draining,
      message: expect.stringMatching(/draining: no sender attached/),
    });
    await expect(h.drive(earlyMpsc.next())).rejects.toMatchObject(draining);

    // The client hears the notice (the link stays up) and fails new streams toward the server at once.
    await h.rt.runMacrotasks();
    expect(events.map((e) => e.type)).toEqual(['up', 'draining']);
    expect(client.metrics()['velo_streaming_drain_notices_total{direction="received"}']).toBe(1);
    expect(await rejection(client.attachAnchor(early.handle))).toMatchObject({
      ...draining,
      message: expect.stringMatching(/is draining/),
    });
    expect(await rejection(client.attachMpscAnchor(earlyMpsc.handle))).toMatchObject(draining);
    // Nothing was live: the drain is over at once.
    expect(await h.drive(drained)).toEqual({ finished: 0, ended: 2 });
    expect(server.metrics()['velo_streaming_active_anchors']).toBe(0);
  });

  it('a peer that does not list lanemux-drain-v1 is not told, and gets the refusal in the attach answer', async () => {
    const { createMessenger } = await import('../../src/messenger/messenger.ts');
    const { memoryTransport } = await import('../../src/adapters/memory.ts');
    const { MESSENGER_MUX_KEY } = await import('../../src/wire/constants.ts');
    const { createNode } = await import('../../src/stream/node.ts');
    const server = await h.node('server');
    const anchor = server.createAnchor<string>();
    // An older build: its HELLO lists the mux only.
    const messenger = await createMessenger({
      transports: [memoryTransport({ network: h.network, listen: false })],
      transportKeys: [MESSENGER_MUX_KEY],
      runtime: h.rt,
    });
    const old = await createNode({ messenger, runtime: h.rt });
    h.nodes.push(old);
    const events: string[] = [];
    old.onPeerState((e) => events.push(e.type));
    await h.drive(old.connect('memory://server'));
    void server.drain();
    await h.rt.runMacrotasks();
    expect(events).toEqual(['up']);
    expect(server.metrics()['velo_streaming_drain_notices_total{direction="sent"}']).toBe(0);
    // What an older producer reads: the reason, and a code it may ignore.
    const answer = await h.drive(
      messenger.request(peerIdOf(server), '_anchor_attach', {
        handle: { hi: `0x${server.workerId.toString(16)}`, lo: `0x${anchor.localId.toString(16)}` },
        supported_transport_keys: [MESSENGER_MUX_KEY],
      }),
    );
    expect(answer).toEqual({ Err: { reason: expect.stringMatching(/draining/), code: 'ERR_DRAINING' } });
    // This build maps the code.
    expect(await h.drive(rejection(old.attachAnchor(anchor.handle)))).toMatchObject(draining);
    await h.drive(messenger.close());
  });

  it('a zero-RTT ticket issued before the drain is refused, even when the open left before the notice arrived', async () => {
    const { server, client } = await serverAndClient();
    const anchor = server.createAnchor<string>();
    const ticket = server.prebindAnchor(anchor)!;
    const other = server.createAnchor<string>();
    const otherTicket = server.prebindAnchor(other)!;
    void server.drain();
    // The client opens in the same task: its OpenSlot is on its way before the notice arrives.
    const sender = await h.drive(client.openAnchorStream<string>(anchor.handle, ticket));
    await h.tick(aborted(sender.cancelSignal));
    expect(sender.cancelSignal.reason).toMatchObject({ ...draining, cause: { code: 'ERR_UNKNOWN_SLOT' } });
    expect(await rejection(sender.send('x'))).toMatchObject(draining);
    // After the notice, an open fails before anything is sent.
    expect(await rejection(client.openAnchorStream(other.handle, otherTicket))).toMatchObject(draining);
    expect((await h.drive(collect(anchor))).error).toMatchObject(draining);
  });

  it.each([
    ['on', undefined],
    ['off', false as const],
  ])(
    'a producer waiting for credit from the draining node fails ERR_DRAINING at its deadline (resume %s)',
    async (_, resume) => {
      const { server, client } = await serverAndClient({
        server: { mux: { initialCredit: 2 } },
        client: resume === undefined ? {} : { resume },
      });
      const anchor = server.createAnchor<string>();
      const sender = await h.drive(client.attachAnchor<string>(anchor.handle));
      // Nobody reads on the server: the sender fills its credit and byte budget, then waits in send().
      const big = 'x'.repeat(64 * 1024);
      let sent = 0;
      const loop = (async () => {
        for (;;) {
          await sender.send(big);
          sent++;
        }
      })().catch((e: unknown) => e);
      const drained = server.drain({ timeout: 100 });
      await h.rt.advance(50);
      const before = sent;
      await h.rt.advance(40);
      expect(sent, 'the sender waits for credit').toBe(before);
      await h.tick(drained);
      expect(await h.tick(loop)).toMatchObject({ ...draining, cause: { code: 'ERR_UNKNOWN_SLOT' } });
      expect(sender.cancelSignal.reason).toMatchObject(draining);
    },
  );

  it('bad options throw one ConfigError naming the field; drain() twice is the same promise; a closed node rejects', async () => {
    const server = await h.node('server');
    for (const bad of [{ timeout: -1 }, { timeout: 1.5 }, { timeout: Number.NaN }, { timeout: Infinity }]) {
      expect(() => server.drain(bad)).toThrow(ConfigError);
      expect(() => server.drain(bad)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG', field: 'timeout' }),
      );
    }
    expect(() => server.drain({ timeout: 86_400_001 })).toThrow(ConfigError);
    expect(() => server.drain({ timeout: '10' as never })).toThrow(/timeout/);
    expect(() => server.drain({ timeoutMs: 10 } as never)).toThrow(expect.objectContaining({ field: 'timeoutMs' }));
    expect(server.draining).toBe(false);
    const first = server.drain({ timeout: 500 });
    expect(server.drain()).toBe(first);
    expect(server.drain({ timeout: 10 })).toBe(first);
    expect(await h.drive(first)).toEqual({ finished: 0, ended: 0 });
    const closed = await h.node('closed');
    await h.drive(closed.close());
    expect(await rejection(closed.drain())).toMatchObject({ code: 'ERR_CLOSED' });
  });
});

describe('node.drain(): live streams finish', () => {
  it('streams both ways, same-worker and MPSC go on to completion, and the drain resolves when the last one ends', async () => {
    const { server, client } = await serverAndClient();
    // server → client, client → server, server → server, client → server MPSC.
    const down = client.createAnchor<string>();
    const up = server.createAnchor<string>();
    const local = server.createAnchor<string>();
    const mpsc = server.createMpscAnchor<string>();
    const toClient = await h.drive(server.attachAnchor<string>(down.handle));
    const toServer = await h.drive(client.attachAnchor<string>(up.handle));
    const toSelf = await h.drive(server.attachAnchor<string>(local.handle));
    const toMpsc = await h.drive(client.attachMpscAnchor<string>(mpsc.handle));
    await h.drive(toMpsc.send('m0'));
    const reads = [collect(down), collect(up), collect(local)];
    const events: MpscEvent<string>[] = [];
    const mpscRead = (async () => {
      for await (const e of mpsc) events.push(e);
    })();

    const drained = server.drain({ timeout: 60_000 });
    const state = watch(drained);
    // Every stream goes on sending during the drain.
    const writes = [produce(toClient, 50, 'd'), produce(toServer, 50, 'u'), produce(toSelf, 50, 'l')];
    await h.tick(Promise.all(writes.slice(0, 2)));
    expect(state.settled, 'the MPSC sender and the readers are not done yet').toBe(false);
    await h.drive(toMpsc.send('m1'));
    await h.drive(toMpsc.finalize());
    const results = await h.tick(Promise.all([...reads, mpscRead.then(() => null)]));
    expect(await Promise.all(writes)).toEqual([null, null, null]);
    expect(results[0]).toEqual({ items: numbered(50, 'd'), error: null });
    expect(results[1]).toEqual({ items: numbered(50, 'u'), error: null });
    expect(results[2]).toEqual({ items: numbered(50, 'l'), error: null });
    // The MPSC anchor ends cleanly once its last sender's end is read: nobody else may attach.
    expect(events.map((e) => (e.kind === 'item' ? e.value : e.kind))).toEqual(['m0', 'm1', 'finalized']);
    // Five streams of the server's: its sender, its two anchors and same-worker sender, its MPSC anchor.
    expect(await h.tick(drained)).toEqual({ finished: 5, ended: 0 });
    expect(server.metricsRegistry.liveSlots).toBe(0);
  });

  it('waits until what finished senders handed over is written: a slow reader still gets every item', async () => {
    // The client holds the server's sender to 2 records of credit.
    const { server, client } = await serverAndClient({ client: { mux: { initialCredit: 2 } } });
    const anchor = client.createAnchor<string>();
    const sender = await h.drive(server.attachAnchor<string>(anchor.handle));
    // Within the slot's byte budget every send resolves at once: the sender is done, its records queued.
    for (let i = 0; i < 20; i++) await sender.send(`${i}`);
    await sender.finalize();
    expect(sender.closed).toBe(true);
    const drained = server.drain({ timeout: 60_000 });
    const state = watch(drained);
    await h.rt.advance(5_000);
    expect(state.settled, 'records are still queued for credit').toBe(false);
    const read = await h.tick(collect(anchor));
    expect(read).toEqual({ items: numbered(20), error: null });
    // The sender had ended before the drain began: nothing live was counted, yet the drain waited for its records.
    expect(await h.tick(drained)).toEqual({ finished: 0, ended: 0 });
  });

  it('a sender that detaches during the drain leaves its anchor to end ERR_DRAINING (no new sender may attach)', async () => {
    const { server, client } = await serverAndClient();
    const anchor = server.createAnchor<string>();
    const sender = await h.drive(client.attachAnchor<string>(anchor.handle));
    const drained = server.drain();
    await h.drive(sender.send('a'));
    await h.tick(sender.detach());
    const read = await h.tick(collect(anchor));
    expect(read.items).toEqual(['a']);
    expect(read.error).toMatchObject({ ...draining, message: expect.stringMatching(/detached/) });
    expect(await h.tick(drained)).toEqual({ finished: 0, ended: 1 });
  });
});

describe('node.drain(): the deadline', () => {
  it('at the default 30 s the streams left end ERR_DRAINING on both sides, saying the node drained', async () => {
    const { server, client } = await serverAndClient();
    const down = client.createAnchor<string>();
    const up = server.createAnchor<string>();
    const toClient = await h.drive(server.attachAnchor<string>(down.handle));
    const toServer = await h.drive(client.attachAnchor<string>(up.handle));
    await h.drive(toClient.send('d0'));
    await h.drive(toServer.send('u0'));
    await h.tick(h.drive(down.next()));
    const drained = server.drain();
    const state = watch(drained);
    await h.rt.advance(29_999);
    expect(state.settled).toBe(false);
    expect(toClient.closed || toServer.closed).toBe(false);
    await h.rt.advance(1);
    expect(state.settled).toBe(true);
    expect(await drained).toEqual({ finished: 0, ended: 2 });
    // The server's own ends.
    expect(toClient.cancelSignal.reason).toMatchObject({ ...draining, message: expect.stringMatching(/drained/) });
    expect(await rejection(toClient.send('late'))).toMatchObject(draining);
    expect(await h.drive(collect(up))).toMatchObject({
      error: { ...draining, message: expect.stringMatching(/drained/) },
    });
    // The client's ends see it too: the stream from the server, and the stream into it.
    const read = await h.tick(collect(down));
    expect(read).toEqual({
      items: [],
      error: expect.objectContaining({ ...draining, message: expect.stringMatching(/drained/) }),
    });
    await h.tick(aborted(toServer.cancelSignal));
    expect(toServer.cancelSignal.reason).toMatchObject(draining);
    expect(await rejection(toServer.send('late'))).toMatchObject(draining);
    await h.tick(h.drive(server.close()));
    expect(server.metricsRegistry.liveSlots).toBe(0);
  });

  it('MPSC both ways at the deadline: the draining anchor ends ERR_DRAINING, the peer MPSC anchor reads a dropped ERR_DRAINING and goes on', async () => {
    const { server, client } = await serverAndClient();
    const serverMpsc = server.createMpscAnchor<string>();
    const clientMpsc = client.createMpscAnchor<string>();
    const intoServer = await h.drive(client.attachMpscAnchor<string>(serverMpsc.handle));
    const intoClient = await h.drive(server.attachMpscAnchor<string>(clientMpsc.handle));
    const local = await h.drive(client.attachMpscAnchor<string>(clientMpsc.handle));
    await h.drive(intoServer.send('s'));
    await h.drive(intoClient.send('c'));
    const drained = server.drain({ timeout: 1_000 });
    await h.rt.advance(1_000);
    expect(await h.drive(drained)).toEqual({ finished: 0, ended: 2 });
    // The draining node's MPSC anchor ends: what it had not read is dropped with it.
    await expect(h.drive(serverMpsc.next())).rejects.toMatchObject(draining);
    await h.tick(aborted(intoServer.cancelSignal));
    expect(intoServer.cancelSignal.reason).toMatchObject(draining);
    expect(intoClient.cancelSignal.reason).toMatchObject(draining);
    // The peer's MPSC anchor: the draining node's sender ends its part with ERR_DRAINING; the others go on.
    const first = await h.tick(clientMpsc.next());
    const second = await h.tick(clientMpsc.next());
    expect(first.value).toMatchObject({ kind: 'item', value: 'c', sender: intoClient.senderId });
    expect(second.value).toMatchObject({
      kind: 'dropped',
      sender: intoClient.senderId,
      error: { ...draining, message: expect.stringMatching(/drained/) },
    });
    await h.drive(local.send('still here'));
    expect((await h.tick(clientMpsc.next())).value).toMatchObject({ kind: 'item', value: 'still here' });
  });

  it('a timeout of 0 ends every live stream at once', async () => {
    const { server, client } = await serverAndClient();
    const down = client.createAnchor<string>();
    const sender = await h.drive(server.attachAnchor<string>(down.handle));
    const drained = server.drain({ timeout: 0 });
    await h.rt.advance(0);
    expect(await h.drive(drained)).toEqual({ finished: 0, ended: 1 });
    expect(sender.cancelSignal.reason).toMatchObject({
      ...draining,
      message: expect.stringMatching(/within the drain timeout \(0 ms\)/),
    });
    expect((await h.tick(collect(down))).error).toMatchObject(draining);
  });

  it('close() during a drain ends it: the streams left end ERR_DRAINING, the peer told first', async () => {
    const { server, client } = await serverAndClient();
    const down = client.createAnchor<string>();
    const sender = await h.drive(server.attachAnchor<string>(down.handle));
    await h.drive(sender.send('a'));
    const drained = server.drain({ timeout: 10_000 });
    await h.rt.advance(10);
    await h.drive(server.close());
    expect(await h.drive(drained)).toEqual({ finished: 0, ended: 1 });
    expect(sender.cancelSignal.reason).toMatchObject({
      ...draining,
      message: expect.stringMatching(/closed while draining/),
    });
    const read = await h.tick(collect(down));
    expect(read).toEqual({ items: ['a'], error: expect.objectContaining(draining) });
  });
});
