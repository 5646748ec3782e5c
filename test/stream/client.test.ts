// `createClient` (`lanemux`): the consumer-only node. Everything on the
// client's side comes from the consumer half of the node; the producer is a full
// `createNode` over the memory transport (through a link the test can cut).
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createClient, LanemuxClient, StreamError, type ClientOptions } from '../../src/index.ts';
import { createNode, LanemuxNode } from '../../src/stream/node.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';
import { collect } from '../support/collect.ts';
import { signalled } from '../support/signalled.ts';

const closers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((n) => n.close()));
});

const metric = (n: LanemuxClient, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

async function pair(clientOptions: Partial<ClientOptions> = {}) {
  const network = createMemoryNetwork();
  const { adapter, cut } = cuttable(network);
  const server = await createNode({ transports: [memoryTransport({ network, name: 'server' })] });
  const client = await createClient({ transports: [adapter], ...clientOptions });
  closers.push(server, client);
  const peer = await client.connect('memory://server');
  return { server, client, peer, cut, reconnect: () => client.connect('memory://server') };
}

describe('createClient (lanemux: the consumer-only node)', () => {
  it('calls a served method and reads every item, in order', async () => {
    const { server, client, peer } = await pair();
    server.serve<{ n: number }, string>('count', async (req, sender) => {
      for (let i = 0; i < req.n; i++) await sender.send(`t${i}`);
    });
    const { items, error } = await collect(client.stream<string>(peer, 'count', { n: 500 }));
    expect(error).toBeNull();
    expect(items).toEqual(Array.from({ length: 500 }, (_, i) => `t${i}`));
  });

  it("cancelling a call aborts the handler's signal, ends the reader and frees both slots", async () => {
    const { server, client, peer } = await pair();
    const aborted = signalled();
    server.serve('forever', async (_req, sender, { signal }) => {
      signal.addEventListener('abort', () => aborted.resolve(), { once: true });
      for (let i = 0; !signal.aborted; i++) await sender.send(i);
    });
    const call = client.stream<number>(peer, 'forever', {});
    expect((await call.next()).value).toBe(0);
    call.cancel();
    await aborted.promise;
    expect((await call.next()).done).toBe(true);
    await waitFor(
      () => metric(server, 'streaming_mux_live_slots') === 0 && metric(client, 'streaming_mux_live_slots') === 0,
      5_000,
      'slots freed',
    );
  });

  it("the call's AbortSignal rejects its reads ERR_ABORTED", async () => {
    const { server, client, peer } = await pair();
    server.serve('hang', async (_req, sender, { signal }) => {
      await sender.send('first');
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    });
    const controller = new AbortController();
    const call = client.stream<string>(peer, 'hang', {}, { signal: controller.signal });
    expect((await call.next()).value).toBe('first');
    controller.abort();
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_ABORTED' });
  });

  it("the client's anchor and zero-RTT ticket open a stream from the producer's openAnchorStream", async () => {
    const { server, client } = await pair();
    const anchor = client.createAnchor<string>();
    const ticket = client.prebindAnchor(anchor);
    expect(typeof ticket).toBe('string');
    const sender = await server.openAnchorStream<string>(anchor.handle, ticket!);
    await sender.send('a');
    await sender.send('b');
    await sender.finalize();
    const got: string[] = [];
    for await (const v of anchor) got.push(v);
    expect(got).toEqual(['a', 'b']);
  });

  it('a call resumes across a lost link: every item arrives once, in order', async () => {
    const { server, client, peer, cut, reconnect } = await pair();
    const half = signalled();
    const go = signalled();
    server.serve<null, number>('long', async (_req, sender) => {
      for (let i = 0; i < 400; i++) {
        if (i === 200) {
          half.resolve();
          await go.promise;
        }
        await sender.send(i);
      }
    });
    const reading = collect(client.stream<number>(peer, 'long', null));
    await half.promise;
    cut();
    await waitFor(
      () => metric(server, 'streaming_mux_live_slots') === 0 && metric(client, 'streaming_mux_live_slots') === 0,
      10_000,
      'the cut seen by both',
    );
    await reconnect();
    await waitFor(() => metric(client, 'streaming_resumed_streams_total') === 1, 10_000, 'resumed');
    go.resolve();
    const { items, error } = await reading;
    expect(error).toBeNull();
    expect(items).toEqual(Array.from({ length: 400 }, (_, i) => i));
  });

  it("refuses a producer's options by name and has no producer methods", async () => {
    const network = createMemoryNetwork();
    const transports = [memoryTransport({ network, listen: false })];
    await expect(
      createClient({ transports, discovery: {}, perStream: {} } as unknown as ClientOptions),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG', fields: ['discovery', 'perStream'] });
    await expect(createClient({ transports, lanes: 0 })).rejects.toMatchObject({ fields: ['lanes'] });
    const client = await createClient({ transports });
    closers.push(client);
    expect(client).toBeInstanceOf(LanemuxClient);
    expect(client).not.toBeInstanceOf(LanemuxNode);
    for (const m of ['attachAnchor', 'openAnchorStream', 'serve', 'createMpscAnchor', 'drain'])
      expect(m in client, m).toBe(false);
  });

  it('close ends the anchors still waiting for a sender', async () => {
    const { client } = await pair();
    const anchor = client.createAnchor<string>();
    await client.close();
    const error = await anchor[Symbol.asyncIterator]()
      .next()
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(StreamError);
    expect(error).toMatchObject({ code: 'ERR_SENDER_DROPPED' });
  });
});
