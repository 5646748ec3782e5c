// `lanemux/client` against a real node over WebSocket: calls, anchors and tickets, cancel, stop,
// errors, and resume across a cut connection.
import { afterEach, describe, expect, it } from 'vitest';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { isLanemuxError } from '../../src/client.ts';
import type { CarrierFactory } from '../../src/client/carrier.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { collect } from '../support/collect.ts';
import { signalled } from '../support/signalled.ts';
import { waitFor } from '../support/wait-for.ts';
import { closeAll, cuttableCarrier, page, wsServer } from './support.ts';

afterEach(closeAll);

describe('lanemux/client over WebSocket', () => {
  it('calls a served method and reads every item, in order', async () => {
    const { node, url } = await wsServer();
    node.serve<{ n: number }, string>('count', async (req, sender) => {
      for (let i = 0; i < req.n; i++) await sender.send(`t${i}`);
    });
    const client = await page(url);
    const { items, error } = await collect(client.stream<string>('count', { n: 2000 }));
    expect(error).toBeNull();
    expect(items).toEqual(Array.from({ length: 2000 }, (_, i) => `t${i}`));
  });

  it('carries every item kind a producer sends: strings, bytes, numbers, objects', async () => {
    const { node, url } = await wsServer();
    node.serve('kinds', async (_req, sender) => {
      await sender.send('s');
      await sender.send(new Uint8Array([1, 2, 3]));
      await sender.send(42);
      await sender.send({ a: [1, 'b', null], big: 2n ** 60n });
    });
    const client = await page(url);
    const { items } = await collect(client.stream('kinds'));
    expect(items).toEqual(['s', new Uint8Array([1, 2, 3]), 42, { a: [1, 'b', null], big: 2n ** 60n }]);
  });

  it('many concurrent calls share one connection, each in order', async () => {
    const { node, url } = await wsServer();
    node.serve<{ id: number }, string>('chat', async (req, sender) => {
      for (let i = 0; i < 200; i++) await sender.send(`${req.id}:${i}`);
    });
    const client = await page(url);
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, id) => collect(client.stream<string>('chat', { id }))),
    );
    results.forEach((r, id) => expect(r.items).toEqual(Array.from({ length: 200 }, (_, i) => `${id}:${i}`)));
    expect(node.metrics()['velo_streaming_mux_live_slots']).toBe(0);
  });

  it('a slow reader holds its producer to the credit window; reading on releases it', async () => {
    const { node, url } = await wsServer();
    node.serve('fast', async (_req, sender) => {
      for (let i = 0; i < 500; i++) await sender.send(i);
    });
    const client = await page(url, { initialCredit: 16 });
    const call = client.stream<number>('fast');
    expect((await call.next()).value).toBe(0);
    await waitFor(() => call.buffered >= 15, 5000, 'the producer filled the window');
    await new Promise((r) => setTimeout(r, 100));
    // The page holds at most C records of the stream: the producer waits for credit.
    expect(call.buffered).toBeLessThanOrEqual(16);
    const { items } = await collect(call);
    expect(items).toEqual(Array.from({ length: 499 }, (_, i) => i + 1));
  });

  it('cancel aborts the handler, ends the reader and frees the slot on both sides', async () => {
    const { node, url } = await wsServer();
    const aborted = signalled();
    node.serve('forever', async (_req, sender, { signal }) => {
      signal.addEventListener('abort', () => aborted.resolve(), { once: true });
      for (let i = 0; !signal.aborted; i++) await sender.send(i);
    });
    const client = await page(url);
    const call = client.stream<number>('forever');
    expect((await call.next()).value).toBe(0);
    call.cancel();
    await aborted.promise;
    expect((await call.next()).done).toBe(true);
    await waitFor(
      () =>
        node.metrics()['velo_streaming_mux_live_slots'] === 0 &&
        client.metrics()['velo_streaming_mux_live_slots'] === 0,
      5000,
      'slots freed',
    );
  });

  it("the call's AbortSignal ends it with ERR_ABORTED and aborts the handler", async () => {
    const { node, url } = await wsServer();
    const aborted = signalled();
    node.serve('hang', async (_req, sender, { signal }) => {
      await sender.send('first');
      signal.addEventListener('abort', () => aborted.resolve(), { once: true });
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    });
    const client = await page(url);
    const controller = new AbortController();
    const call = client.stream<string>('hang', {}, { signal: controller.signal });
    expect((await call.next()).value).toBe('first');
    controller.abort();
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await aborted.promise;
  });

  it('an unknown method ends the call with ERR_UNKNOWN_METHOD', async () => {
    const { url } = await wsServer();
    const client = await page(url);
    const { error } = await collect(client.stream('nope'));
    expect(isLanemuxError(error, 'ERR_UNKNOWN_METHOD')).toBe(true);
  });

  it("a handler's throw ends the call with its code and message", async () => {
    const { node, url } = await wsServer();
    node.serve('fails', async (_req, sender) => {
      await sender.send(1);
      throw new Error('model crashed');
    });
    const client = await page(url);
    const { items, error } = await collect(client.stream('fails'));
    expect(items).toEqual([1]);
    expect(error).toMatchObject({ code: 'ERR_HANDLER_FAILED', message: 'fails: model crashed' });
  });

  it("a producer's sender.error rejects one read and the stream goes on", async () => {
    const { node, url } = await wsServer();
    node.serve('warn', async (_req, sender) => {
      await sender.send('a');
      await sender.error('careful');
      await sender.send('b');
    });
    const client = await page(url);
    const call = client.stream<string>('warn');
    expect((await call.next()).value).toBe('a');
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_SENDER_ERROR', message: 'careful' });
    expect((await call.next()).value).toBe('b');
    expect((await call.next()).done).toBe(true);
  });

  it('reads as a ReadableStream', async () => {
    const { node, url } = await wsServer();
    node.serve('abc', async (_req, sender) => {
      for (const t of ['a', 'b', 'c']) await sender.send(t);
    });
    const client = await page(url);
    const out: string[] = [];
    const reader = client.stream<string>('abc').readable.getReader();
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      out.push(r.value);
    }
    expect(out).toEqual(['a', 'b', 'c']);
  });

  it("an anchor's ticket opens a stream from the producer's openAnchorStream, zero-RTT", async () => {
    const { node, url } = await wsServer();
    const client = await page(url);
    const anchor = client.anchor<string>();
    const sender = await node.openAnchorStream<string>(anchor.handle, client.ticket(anchor));
    await sender.send('a');
    await sender.send('b');
    await sender.finalize();
    expect((await collect(anchor)).items).toEqual(['a', 'b']);
  });

  it('a producer attaches to an anchor by its handle', async () => {
    const { node, url } = await wsServer();
    const client = await page(url);
    const anchor = client.anchor<number>();
    const sender = await node.attachAnchor<number>(anchor.handle);
    for (let i = 0; i < 100; i++) await sender.send(i);
    await sender.finalize();
    expect((await collect(anchor)).items).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it('a second attach to a taken anchor is refused', async () => {
    const { node, url } = await wsServer();
    const client = await page(url);
    const anchor = client.anchor<number>();
    await node.attachAnchor<number>(anchor.handle);
    await expect(node.attachAnchor<number>(anchor.handle)).rejects.toSatisfy((e) => isLanemuxError(e));
  });

  it('stop() fires the producer stopSignal and the stream ends when it finalizes', async () => {
    const { node, url } = await wsServer();
    node.serve('stoppable', async (_req, sender) => {
      for (let i = 0; !sender.stopSignal.aborted; i++) await sender.send(i);
    });
    const client = await page(url);
    const call = client.stream<number>('stoppable');
    await call.next();
    call.stop();
    const { error } = await collect(call);
    expect(error).toBeNull();
  });

  it('a stream resumes across a cut connection: nothing lost, repeated or reordered', async () => {
    const { node, url } = await wsServer();
    node.serve<{ n: number }, number>('count', async (req, sender) => {
      for (let i = 0; i < req.n; i++) {
        await sender.send(i);
        if (i % 50 === 0) await new Promise((r) => setTimeout(r, 1));
      }
    });
    const net = cuttableCarrier();
    const client = await page(url, { transport: net.factory });
    const call = client.stream<number>('count', { n: 3000 });
    const items: number[] = [];
    let cuts = 0;
    for await (const v of call) {
      items.push(v);
      if (v > 0 && v % 700 === 0) {
        net.cut();
        cuts++;
      }
    }
    expect(cuts).toBe(4);
    expect(net.opened()).toBeGreaterThanOrEqual(5);
    expect(items).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    expect(client.metrics()['resumed_streams_total']).toBeGreaterThanOrEqual(4);
  });

  it('a stream not resumed within the window ends ERR_SENDER_DROPPED after what arrived', async () => {
    const { node, url } = await wsServer();
    node.serve('one', async (_req, sender) => {
      await sender.send('x');
      await new Promise((r) => setTimeout(r, 60_000));
    });
    const net = cuttableCarrier();
    const client = await page(url, { transport: net.factory, resumeWindowMs: 300, reconnectDelayMs: 60_000 });
    const call = client.stream<string>('one');
    expect((await call.next()).value).toBe('x');
    net.cut();
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED', reason: 'window' });
  });

  it('connect rejects at once when nothing listens', async () => {
    const { connect } = await import('../../src/client.ts');
    const WebSocket = (await import('ws')).default;
    await expect(connect('ws://127.0.0.1:9/lanemux', { WebSocket: WebSocket as never })).rejects.toMatchObject({
      code: 'ERR_CONNECT',
    });
  });

  it('a bad option throws ERR_INVALID_CONFIG naming it', async () => {
    const { connect } = await import('../../src/client.ts');
    await expect(connect('ws://127.0.0.1:9/x', { initialCredit: 0 })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'initialCredit',
    });
  });

  it('a refused option is explained by zod, loaded on demand, listing every bad field', async () => {
    const { connect } = await import('../../src/client.ts');
    const err = await connect('ws://127.0.0.1:9/x', { initialCredit: 0, heartbeatIntervalMs: 1.5 }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_INVALID_CONFIG', fields: ['initialCredit', 'heartbeatIntervalMs'] });
    // zod's prettified listing, not the hand-written range check's "must be an integer in 1..65536".
    const message = (err as Error).message;
    expect(message).toContain('✖ Too small: expected number to be >=1');
    expect(message).toContain('→ at heartbeatIntervalMs');
    expect((err as Error).cause).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'initialCredit' });
  });
});

describe('lanemux/client across connections', () => {
  it('a call made while the connection is down goes out once it is back', async () => {
    const { node, url } = await wsServer();
    node.serve('hi', async (_req, sender) => {
      await sender.send('hello');
    });
    const net = cuttableCarrier();
    const client = await page(url, { transport: net.factory, reconnectDelayMs: 50 });
    const states: string[] = [];
    client.onState((s) => states.push(s));
    net.cut();
    expect(client.connected).toBe(false);
    const { items, error } = await collect(client.stream<string>('hi'));
    expect(error).toBeNull();
    expect(items).toEqual(['hello']);
    expect(states).toEqual(['down', 'up']);
  });

  it('a re-dial the carrier refuses as not retryable closes the client with that error, and dials no more', async () => {
    const { url } = await wsServer();
    const net = cuttableCarrier();
    let dials = 0;
    const refusal = new TransportError('ERR_CONNECT', 'certificate refused', { retryable: false });
    const factory: CarrierFactory = async (u, events, open) => {
      dials++;
      if (dials > 1) throw refusal;
      return net.factory(u, events, open);
    };
    const client = await page(url, { transport: factory, reconnectDelayMs: 5 });
    const closed = new Promise<unknown>((resolve) => client.onState((s, e) => s === 'closed' && resolve(e)));
    net.cut();
    expect(await closed).toBe(refusal);
    await expect(client.stream('hi').next()).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect(dials).toBe(2);
  });

  it('finished calls leave nothing behind in the client', async () => {
    const { node, url } = await wsServer();
    node.serve('one', async (_req, sender) => {
      await sender.send(1);
    });
    const client = await page(url);
    for (let i = 0; i < 300; i++) await collect(client.stream('one'));
    const cancelled = client.stream('one');
    cancelled.cancel();
    expect(client.metrics()['client_open_streams']).toBe(0);
  });

  it('a server that comes back as another process ends the suspended streams (restarted), and new calls work', async () => {
    const first = await wsServer();
    const port = Number(new URL(first.url).port);
    first.node.serve('slow', async (_req, sender, { signal }) => {
      await sender.send('a');
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    });
    const client = await page(first.url, { reconnectDelayMs: 20 });
    const call = client.stream<string>('slow');
    expect((await call.next()).value).toBe('a');
    await first.node.close();
    const second = await wsServer({ transports: [webSocketServerTransport({ port })] });
    second.node.serve('slow', async (_req, sender) => {
      await sender.send('b');
    });
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED', reason: 'restarted' });
    expect((await collect(client.stream<string>('slow'))).items).toEqual(['b']);
  });
});
