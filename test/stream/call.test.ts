// Request → stream in one call: `server.serve(method, handler)` and `client.stream(peer, method, request)`
// (docs/protocol.md §8.6), two nodes over the memory transport; the client dials through a link the
// test can cut.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { LanemuxError } from '../../src/errors.ts';
import { CallError } from '../../src/stream/call-envelope.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { StreamError } from '../../src/stream/errors.ts';
import { formatHandle } from '../../src/stream/handle.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import { RemoteError } from '../../src/messenger/errors.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';
import { collect } from '../support/collect.ts';
import { signalled } from '../support/signalled.ts';

const nodes: LanemuxNode[] = [];
const messengers: Messenger[] = [];
afterEach(async () => {
  await Promise.all([...nodes.splice(0), ...messengers.splice(0)].map((n) => n.close()));
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

async function pair(serverOptions: Partial<NodeOptions> = {}, clientOptions: Partial<NodeOptions> = {}) {
  const network = createMemoryNetwork();
  const { adapter, cut } = cuttable(network);
  const server = await createNode({ transports: [memoryTransport({ network, name: 'server' })], ...serverOptions });
  const client = await createNode({ transports: [adapter], ...clientOptions });
  nodes.push(server, client);
  const peer = await client.connect('memory://server');
  const reconnect = async (): Promise<void> => {
    await client.connect('memory://server');
  };
  return { server, client, peer, cut, reconnect, network };
}

/** A handler that sends nothing and returns once its signal aborts. */
const untilAborted = (_req: unknown, _sender: unknown, { signal }: { signal: AbortSignal }): Promise<void> =>
  new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));

describe('serve / stream', () => {
  it('a call streams 1,000 items, exactly and in order, and the handler sees the request and the caller', async () => {
    const { server, client, peer } = await pair();
    let caller = '';
    server.serve<{ n: number; word: string }, string>('generate', async (req, sender, ctx) => {
      caller = ctx.peer;
      for (let i = 0; i < req.n; i++) await sender.send(`${req.word}${i}`);
    });
    const { items, error } = await collect(client.stream<string>(peer, 'generate', { n: 1000, word: 'tok' }));
    expect(error).toBeNull();
    expect(items).toEqual(Array.from({ length: 1000 }, (_, i) => `tok${i}`));
    expect(caller).toBe(client.workerId.toString(16).padStart(16, '0'));
  });

  it('the stream opens from the ticket in the request: no attach request crosses the wire', async () => {
    const { server, client, peer } = await pair();
    server.serve('one', async (_req, sender) => {
      await sender.send('x');
    });
    expect((await collect(client.stream(peer, 'one', null))).items).toEqual(['x']);
    const ops = (n: LanemuxNode, op: string): number =>
      metric(n, `streaming_anchor_operations_total{operation="${op}",outcome="success",transport_scheme="mux"}`);
    expect([ops(client, 'prebind'), ops(server, 'open'), ops(server, 'attach'), ops(client, 'attach')]).toEqual([
      1, 1, 0, 0,
    ]);
  });

  it('200 concurrent calls over one connection each get exactly their own items', async () => {
    const { server, client, peer } = await pair();
    server.serve<number, number>('count', async (id, sender) => {
      for (let i = 0; i < 50; i++) await sender.send(id * 1000 + i);
    });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, id) => collect(client.stream<number>(peer, 'count', id))),
    );
    results.forEach((r, id) => {
      expect(r.error).toBeNull();
      expect(r.items).toEqual(Array.from({ length: 50 }, (_, i) => id * 1000 + i));
    });
    expect(client.metrics()['velo_messenger_connections_refused_total{reason="link_evicted"}'] ?? 0).toBe(0);
    await waitFor(() => metric(server, 'streaming_mux_live_slots') === 0, 5_000, 'slots freed');
  });

  it('an unknown method fails the call with ERR_UNKNOWN_METHOD, and so does one no longer served', async () => {
    const { server, client, peer } = await pair();
    const r = await collect(client.stream(peer, 'nope', {}));
    expect(r.error).toBeInstanceOf(CallError);
    expect((r.error as CallError).code).toBe('ERR_UNKNOWN_METHOD');
    expect((r.error as CallError).method).toBe('nope');

    const unserve = server.serve('gone', async (_req, sender) => {
      await sender.send(1);
    });
    expect((await collect(client.stream(peer, 'gone', {}))).items).toEqual([1]);
    unserve();
    const after = await collect(client.stream(peer, 'gone', {}));
    expect((after.error as CallError).code).toBe('ERR_UNKNOWN_METHOD');
    // Served again after the disposer: it answers again.
    server.serve('gone', async (_req, sender) => {
      await sender.send(2);
    });
    expect((await collect(client.stream(peer, 'gone', {}))).items).toEqual([2]);
  });

  it('a handler throw reaches the client as a typed error after the items sent before it', async () => {
    const { server, client, peer } = await pair();
    server.serve('plain', async (_req, sender) => {
      await sender.send('a');
      throw new Error('model exploded');
    });
    server.serve('typed', async () => {
      throw new LanemuxError('ERR_QUOTA', 'out of tokens', { retryable: true });
    });
    const plain = await collect(client.stream(peer, 'plain', {}));
    expect(plain.items).toEqual(['a']);
    expect(plain.error).toBeInstanceOf(CallError);
    expect((plain.error as CallError).code).toBe('ERR_HANDLER_FAILED');
    expect((plain.error as Error).message).toContain('model exploded');
    const typed = await collect(client.stream(peer, 'typed', {}));
    expect((typed.error as CallError).code).toBe('ERR_QUOTA');
    expect((typed.error as CallError).retryable).toBe(true);
    // A plain sender error is not a failure: the stream goes on.
    server.serve('warn', async (_req, sender) => {
      await sender.error('just a warning');
      await sender.send('b');
    });
    const call = client.stream(peer, 'warn', {});
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_SENDER_ERROR' });
    expect(await call.next()).toEqual({ done: false, value: 'b' });
    expect((await call.next()).done).toBe(true);
  });

  it('a client cancel aborts the handler signal and frees the call and its slot', async () => {
    const { server, client, peer } = await pair();
    const aborted = signalled();
    const started = signalled();
    server.serve(
      'forever',
      async (_req, sender, { signal }) => {
        signal.addEventListener('abort', () => aborted.resolve(), { once: true });
        started.resolve();
        for (let i = 0; !signal.aborted; i++) await sender.send(i);
      },
      { maxCallsPerPeer: 1 },
    );
    const call = client.stream<number>(peer, 'forever', {});
    expect((await call.next()).value).toBe(0);
    await started.promise;
    call.cancel();
    await aborted.promise;
    expect((await call.next()).done).toBe(true);
    await waitFor(
      () => metric(server, 'streaming_mux_live_slots') === 0 && metric(client, 'streaming_mux_live_slots') === 0,
      5_000,
      'slots freed',
    );
    // The per-peer limit is 1: a second call runs only because the first one's place was freed.
    const again = client.stream<number>(peer, 'forever', {});
    expect((await again.next()).value).toBe(0);
    again.cancel();
  });

  it("the call's AbortSignal cancels it: reads reject ERR_ABORTED and the handler's signal aborts", async () => {
    const { server, client, peer } = await pair();
    const aborted = signalled();
    server.serve('hang', async (req, sender, ctx) => {
      await sender.send('first');
      await untilAborted(req, sender, ctx);
      aborted.resolve();
    });
    const controller = new AbortController();
    const call = client.stream<string>(peer, 'hang', {}, { signal: controller.signal });
    expect((await call.next()).value).toBe('first');
    controller.abort();
    await expect(call.next()).rejects.toBeInstanceOf(StreamError);
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await aborted.promise;
  });

  it("the handler's signal aborts when the caller's node goes away", async () => {
    const { server, client, peer } = await pair();
    const aborted = signalled();
    server.serve('hang', async (req, sender, ctx) => {
      await sender.send('first');
      await untilAborted(req, sender, ctx);
      aborted.resolve();
    });
    const call = client.stream<string>(peer, 'hang', {});
    expect((await call.next()).value).toBe('first');
    await client.close();
    await aborted.promise;
    await waitFor(() => metric(server, 'streaming_mux_live_slots') === 0, 5_000, 'slot freed');
  });

  it('the answer reads as a WHATWG ReadableStream too', async () => {
    const { server, client, peer } = await pair();
    server.serve<number, number>('count', async (n, sender) => {
      for (let i = 0; i < n; i++) await sender.send(i);
    });
    const out: number[] = [];
    await client
      .stream<number>(peer, 'count', 5)
      .readable.pipeTo(new WritableStream({ write: (v) => void out.push(v) }));
    expect(out).toEqual([0, 1, 2, 3, 4]);
  });

  it('an item already buffered settles next() at once: no promise chained per item', async () => {
    const { server, client, peer } = await pair();
    server.serve<number, number>('count', async (n, sender) => {
      for (let i = 0; i < n; i++) await sender.send(i);
    });
    const call = client.stream<number>(peer, 'count', 3);
    expect(await call.next()).toEqual({ done: false, value: 0 });
    // The slot, open since item 0 came, closes at the stream's terminal: every item is in the anchor then.
    await waitFor(() => metric(client, 'streaming_mux_live_slots') === 0, 5_000, 'the terminal');
    // A settled promise runs its reaction before a microtask queued after it; a chained `.then` would not.
    const order: string[] = [];
    const read = call.next().then((r) => order.push(`item ${r.value}`));
    const tick = Promise.resolve().then(() => order.push('tick'));
    await Promise.all([read, tick]);
    expect(order).toEqual(['item 1', 'tick']);
    expect(await call.next()).toEqual({ done: false, value: 2 });
    expect(await call.next()).toEqual({ done: true, value: undefined });
  });

  it('a draining server refuses new calls with ERR_DRAINING (retryable)', async () => {
    const { server, client, peer } = await pair();
    let ran = 0;
    server.serve('m', () => {
      ran++;
    });
    void server.drain({ timeout: 1_000 });
    const r = await collect(client.stream(peer, 'm', {}));
    expect(r.error).toBeInstanceOf(LanemuxError);
    expect((r.error as LanemuxError).code).toBe('ERR_DRAINING');
    expect((r.error as LanemuxError).retryable).toBe(true);
    expect(ran).toBe(0);
  });

  it('the per-peer and per-node concurrency limits refuse with ERR_CALL_LIMIT (retryable)', async () => {
    const { server, client, peer } = await pair();
    server.serve('slow', untilAborted, { maxCallsPerPeer: 2 });
    server.serve('few', untilAborted, { maxCalls: 1 });
    const running = [client.stream(peer, 'slow', 1), client.stream(peer, 'slow', 2)];
    await waitFor(() => metric(server, 'streaming_mux_live_slots') === 2, 5_000, 'two calls running');
    const third = await collect(client.stream(peer, 'slow', 3));
    expect(third.error).toBeInstanceOf(CallError);
    expect((third.error as CallError).code).toBe('ERR_CALL_LIMIT');
    expect((third.error as CallError).retryable).toBe(true);
    expect((third.error as Error).message).toContain('maxCallsPerPeer');
    const first = client.stream(peer, 'few', 1);
    await waitFor(() => metric(server, 'streaming_mux_live_slots') === 3, 5_000, 'third call running');
    const over = await collect(client.stream(peer, 'few', 2));
    expect((over.error as CallError).code).toBe('ERR_CALL_LIMIT');
    expect((over.error as Error).message).toContain('maxCalls');
    for (const c of [...running, first]) c.cancel();
    // Refused calls leave nothing behind on the client.
    await waitFor(() => metric(client, 'streaming_active_anchors') === 0, 5_000, 'anchors freed');
  });

  it('a request over maxRequestBytes is refused with ERR_REQUEST_TOO_LARGE, one at the limit runs', async () => {
    const { server, client, peer } = await pair();
    let ran = 0;
    server.serve(
      'small',
      () => {
        ran++;
      },
      { maxRequestBytes: 1024 },
    );
    const big = await collect(client.stream(peer, 'small', 'x'.repeat(2000)));
    expect(big.error).toBeInstanceOf(CallError);
    expect((big.error as CallError).code).toBe('ERR_REQUEST_TOO_LARGE');
    expect((big.error as Error).message).toContain('1024');
    // A 1,024-byte encoding: str16 header (3 bytes) + 1,021 characters.
    expect((await collect(client.stream(peer, 'small', 'x'.repeat(1021)))).error).toBeNull();
    expect(ran).toBe(1);
    // Over the link's message limit: refused before it is sent.
    const huge = await collect(client.stream(peer, 'small', new Uint8Array(2 * 1024 * 1024)));
    expect((huge.error as CallError).code).toBe('ERR_REQUEST_TOO_LARGE');
  });

  it('a malformed envelope sent to a served method is refused ERR_INVALID_REQUEST without running the handler', async () => {
    const { server, client, network } = await pair();
    let ran = 0;
    server.serve('m', () => {
      ran++;
    });
    const raw = await createMessenger({ transports: [memoryTransport({ network, listen: false })] });
    messengers.push(raw);
    const serverId = (await raw.connect('memory://server')).id;
    const own = formatHandle({ workerId: raw.self.workerId, localId: 1n });
    const refusal = (body: unknown) =>
      raw.request(serverId, '_call.m', body).then(
        () => null,
        (e: unknown) => e,
      );
    for (const body of [
      null,
      { v: 2, h: own, r: new Uint8Array([0xc0]) },
      { v: 1, r: new Uint8Array([0xc0]) },
      { v: 1, h: own, r: 'not bytes' },
      { v: 1, h: own, t: 7, r: new Uint8Array([0xc0]) },
      { v: 1, h: own, r: new Uint8Array([0xc1]) },
      // Another worker's anchor: the server must not open streams on the caller's say-so.
      { v: 1, h: client.createAnchor().handle, r: new Uint8Array([0xc0]) },
    ]) {
      const e = await refusal(body);
      expect(e, JSON.stringify(body)).toBeInstanceOf(RemoteError);
      expect((e as RemoteError).code).toMatch(/^ERR_INVALID_(REQUEST|HANDLE)$/);
    }
    expect(ran).toBe(0);
  });

  it('bad serve arguments throw a ConfigError naming the field', async () => {
    const { server } = await pair();
    expect(() => server.serve('', () => {})).toThrow(/method/);
    expect(() => server.serve('x'.repeat(300), () => {})).toThrow(/method/);
    expect(() => server.serve('m', () => {}, { maxCallsPerPeer: 0 })).toThrow(/maxCallsPerPeer/);
    expect(() => server.serve('m', () => {}, { bogus: 1 } as never)).toThrow(/bogus/);
    server.serve('m', () => {});
    expect(() => server.serve('m', () => {})).toThrow(/already served/);
  });

  it('a call survives 5 link cuts with resume on: every item arrives once, in order', async () => {
    const { server, client, peer, cut, reconnect } = await pair();
    const N = 1800;
    // The handler pauses at each sixth of the stream until the test has cut the link and dialled again.
    const reached = Array.from({ length: 6 }, signalled);
    const go = Array.from({ length: 6 }, signalled);
    server.serve<null, number>('long', async (_req, sender) => {
      for (let i = 0; i < N; i++) {
        if (i > 0 && i % (N / 6) === 0) {
          const k = i / (N / 6);
          reached[k]!.resolve();
          await go[k]!.promise;
        }
        await sender.send(i);
      }
    });
    const reading = collect(client.stream<number>(peer, 'long', null));
    for (let k = 1; k <= 5; k++) {
      await reached[k]!.promise;
      // Right after the handler's last sends: some of them are still on their way, lost with the link.
      cut();
      await waitFor(
        () => metric(server, 'streaming_mux_live_slots') === 0 && metric(client, 'streaming_mux_live_slots') === 0,
        10_000,
        `cut ${k} seen by both`,
      );
      await reconnect();
      await waitFor(() => metric(client, 'streaming_resumed_streams_total') >= k, 10_000, `resume ${k}`);
      go[k]!.resolve();
    }
    const { items, error } = await reading;
    expect(error).toBeNull();
    expect(items).toEqual(Array.from({ length: N }, (_, i) => i));
    expect(metric(client, 'streaming_resumed_streams_total')).toBe(5);
  });

  it('a zero-RTT stream whose first batch (its OpenSlot) is lost with the link resumes from its first item', async () => {
    const { server, client, cut, reconnect } = await pair();
    const anchor = client.createAnchor<number>();
    const sender = await server.openAnchorStream<number>(anchor.handle, client.prebindAnchor(anchor)!);
    for (let i = 0; i < 3; i++) await sender.send(i);
    // Cut before the batcher's turn: the OpenSlot and the items never reach the client.
    cut();
    await waitFor(() => metric(server, 'streaming_mux_live_slots') === 0, 5_000, 'the server saw the cut');
    await reconnect();
    await waitFor(() => metric(client, 'streaming_resumed_streams_total') === 1, 5_000, 'resumed');
    await sender.send(3);
    await sender.finalize();
    const items: number[] = [];
    for await (const v of anchor) items.push(v);
    expect(items).toEqual([0, 1, 2, 3]);
  });
});
