// An attach caught by a lost link (docs/protocol.md §8.3 "Attach across a lost link"): with resume on,
// an attach whose request or answer is lost with its link is made again once the link is back —
// naming the same attach id, so a consumer that answered the lost one answers again instead of
// refusing — and the stream opens as if nothing happened. The cut is made at one exact message.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { collect } from '../support/collect.ts';
import { type CutTrap, cuttable, loseNext } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const REQUEST = 0x03;
const RESPONSE = 0x04;
const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

/**
 * A consumer at memory://consumer and a producer dialling it through a link `trap` may cut; the
 * dial re-dials at once unless `redial` is false.
 */
async function pair(trap: CutTrap, options: Partial<NodeOptions> = {}, redial = true) {
  const network = createMemoryNetwork();
  const { adapter } = cuttable(network, 'network cut', trap);
  const consumer = await createNode({ transports: [memoryTransport({ network, name: 'consumer' })], ...options });
  const producer = await createNode({ transports: [adapter], ...options });
  nodes.push(consumer, producer);
  await producer.connect('memory://consumer', redial ? { reconnect: { initialDelayMs: 1, jitterMs: 0 } } : {});
  return { consumer, producer };
}

/**
 * An anchor on the consumer being read, and the producer's attach to it, whose next message of
 * `kind` (the attach's request or answer) is lost with the link; resolves once it was.
 */
async function attachAcrossLostMessage(kind: number, direction: 'inbound' | 'outbound') {
  const { state, trap } = loseNext(kind, direction);
  const { consumer, producer } = await pair(trap);
  const anchor = consumer.createAnchor<string>();
  const read = collect(anchor);
  state.armed = true;
  const attaching = producer.attachAnchor<string>(anchor.handle);
  attaching.catch(() => {}); // awaited by the test
  await waitFor(() => state.fired === 1);
  return { consumer, producer, anchor, read, attaching };
}

describe('attach across a lost link', () => {
  it('the answer is lost with the link: the attach is made again once the link is back and the stream delivers every item', async () => {
    const { consumer, producer, read, attaching } = await attachAcrossLostMessage(RESPONSE, 'inbound');
    // The consumer answered (its bind waits for the resume) and the answer never arrived.
    const sender = await attaching;
    for (let i = 0; i < 5; i++) await sender.send(`${i}`);
    await sender.finalize();
    expect(await read).toEqual({ items: ['0', '1', '2', '3', '4'], error: null });
    // The bind of the lost answer is gone with the stream: nothing is left on either side.
    await waitFor(() =>
      [consumer, producer].every(
        (n) => metric(n, 'streaming_mux_live_slots') === 0 && metric(n, 'streaming_mux_live_binds') === 0,
      ),
    );
  });

  it('the request is lost with the link: the attach is made again once the link is back and the stream delivers every item', async () => {
    const { read, attaching } = await attachAcrossLostMessage(REQUEST, 'outbound');
    const sender = await attaching;
    await sender.send('only');
    await sender.finalize();
    expect(await read).toEqual({ items: ['only'], error: null });
  });

  it('the link is lost just after the attach started, before its request went out: the attach waits for the link and goes on', async () => {
    const network = createMemoryNetwork();
    const { adapter, cut } = cuttable(network);
    const consumer = await createNode({ transports: [memoryTransport({ network, name: 'consumer' })] });
    const producer = await createNode({ transports: [adapter] });
    nodes.push(consumer, producer);
    await producer.connect('memory://consumer', { reconnect: { initialDelayMs: 1, jitterMs: 0 } });
    const anchor = consumer.createAnchor<string>();
    const read = collect(anchor);
    const attaching = producer.attachAnchor<string>(anchor.handle);
    attaching.catch(() => {}); // awaited below
    // The peer was there when the attach looked it up; it is gone when the request is made.
    cut();
    const sender = await attaching;
    await sender.send('a');
    await sender.finalize();
    expect(await read).toEqual({ items: ['a'], error: null });
  });

  it('another sender cannot take the anchor whose answer was lost: its attach is refused, the first one goes on', async () => {
    const { producer, anchor, read, attaching } = await attachAcrossLostMessage(RESPONSE, 'inbound');
    const first = await attaching;
    await expect(producer.attachAnchor<string>(anchor.handle)).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
    await first.send('x');
    await first.finalize();
    expect(await read).toEqual({ items: ['x'], error: null });
  });

  it('a link that does not come back fails the attach retryable', async () => {
    const { state, trap } = loseNext(RESPONSE, 'inbound');
    const { consumer, producer } = await pair(trap, {}, false);
    const anchor = consumer.createAnchor<string>();
    state.armed = true;
    const error = await producer.attachAnchor<string>(anchor.handle, { timeoutMs: 300 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ retryable: true });
    expect(state.fired).toBe(1);
  });

  it('without resume the attach fails at once with the lost link, as before', async () => {
    const { state, trap } = loseNext(RESPONSE, 'inbound');
    const { consumer, producer } = await pair(trap, { resume: false });
    const anchor = consumer.createAnchor<string>();
    state.armed = true;
    await expect(producer.attachAnchor<string>(anchor.handle)).rejects.toMatchObject({ code: 'ERR_PEER_GONE' });
  });
});
