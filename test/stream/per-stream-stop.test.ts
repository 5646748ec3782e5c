/**
 * `requestStop()` on the per-stream path (`tcp-stream`): the consumer's stop reaches the producer's
 * `stopSignal`, for plain and MPSC anchors, before or after the connection arrived, and an older
 * producer that ignores what the consumer writes keeps working.
 */
import { describe, it, expect, afterEach } from 'vitest';
import type net from 'node:net';
import { ATTACH_HANDLER, u128 } from '../../src/stream/attach-messages.ts';
import { TCP_STREAM_KEY } from '../../src/wire/constants.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { FRAME_FINALIZED, encodeFrame } from '../../src/wire/frame.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { rawPeer } from '../transport/raw-peer.ts';
import { within } from '../transport/helpers.ts';

const nodes: LanemuxNode[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const n of nodes.splice(0)) await n.close();
});

async function pair() {
  const [a, b] = LoopMessenger.pair();
  const consumer = await createNode({ messenger: a, perStream: tcpStreamTransport(), mux: { enabled: false } });
  nodes.push(consumer);
  const producer = await createNode({ messenger: b, perStream: tcpStreamTransport(), mux: { enabled: false } });
  nodes.push(producer);
  return { a, b, consumer, producer };
}

/** Resolves when `signal` fires. */
function fired(signal: AbortSignal): Promise<void> {
  return signal.aborted
    ? Promise.resolve()
    : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

describe('per-stream path: requestStop reaches the producer', () => {
  it("plain anchor: the producer's stopSignal fires after the consumer's requestStop, and the stream finishes normally", async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    expect(sender.negotiatedTransport).toBe(TCP_STREAM_KEY);
    await sender.send('a');
    expect(await within(anchor.next(), 2_000, 'the first item')).toEqual({ done: false, value: 'a' });
    expect(sender.stopSignal.aborted).toBe(false);
    anchor.requestStop();
    await within(fired(sender.stopSignal), 2_000, "the producer's stopSignal");
    expect(sender.cancelSignal.aborted).toBe(false);
    // A stop is a request: the producer may still send its last output and finalize.
    await sender.send('last');
    await sender.finalize();
    const rest: string[] = [];
    for await (const item of anchor) rest.push(item);
    expect(rest).toEqual(['last']);
  });

  it("MPSC anchor: every per-stream sender's stopSignal fires after requestStop", async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const s1 = await producer.attachMpscAnchor<string>(anchor.handle);
    const s2 = await producer.attachMpscAnchor<string>(anchor.handle);
    expect([s1.negotiatedTransport, s2.negotiatedTransport]).toEqual([TCP_STREAM_KEY, TCP_STREAM_KEY]);
    await s1.send('one');
    await s2.send('two');
    const seen = [await within(anchor.next(), 2_000, 'an event'), await within(anchor.next(), 2_000, 'an event')].map(
      (r) => (r.value as { value: string }).value,
    );
    expect(seen.sort()).toEqual(['one', 'two']);
    anchor.requestStop();
    await within(Promise.all([fired(s1.stopSignal), fired(s2.stopSignal)]), 2_000, 'both stopSignals');
    await s1.finalize();
    await s2.finalize();
  });

  it('a stop asked before the connection is accepted is delivered once it is (plain and MPSC)', async () => {
    const { consumer, producer } = await pair();
    const plain = consumer.createAnchor<string>();
    const mpsc = consumer.createMpscAnchor<string>();
    const [s1, s2] = await Promise.all([
      producer.attachAnchor<string>(plain.handle),
      producer.attachMpscAnchor<string>(mpsc.handle),
    ]);
    // The dial has just completed: the consumer has not read the preface yet.
    plain.requestStop();
    mpsc.requestStop();
    await within(Promise.all([fired(s1.stopSignal), fired(s2.stopSignal)]), 2_000, 'both stopSignals');
    await s1.finalize();
    await s2.finalize();
  });

  it('on the wire the stop is one consumer-to-producer frame [00 00 00 01][00], sent once; a producer that ignores it still finishes cleanly', async () => {
    const [a, b] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: a, perStream: tcpStreamTransport(), mux: { enabled: false } });
    nodes.push(consumer);
    const anchor = consumer.createAnchor<string>();
    const h = parseHandle(anchor.handle);
    const answer = (await b.request(a.self.id, ATTACH_HANDLER, {
      handle: u128(h.workerId, h.localId),
      supported_transport_keys: [TCP_STREAM_KEY],
    })) as {
      Ok: { routing_session_id: string; endpoint: string };
    };
    const peer = await rawPeer(answer.Ok.endpoint, sockets, false);
    const preface = Buffer.alloc(16);
    preface.writeBigUInt64BE(h.localId, 0);
    preface.writeBigUInt64BE(BigInt(answer.Ok.routing_session_id), 8);
    peer.socket.write(preface);
    peer.send(encodeFrame({ kind: 'Item', value: 'x' }));
    expect(await within(anchor.next(), 2_000, 'the first item')).toEqual({ done: false, value: 'x' });
    anchor.requestStop();
    anchor.requestStop();
    // The old producer reads nothing of it; it goes on and ends the stream.
    peer.send(encodeFrame({ kind: 'Item', value: 'y' }));
    peer.send(FRAME_FINALIZED);
    peer.socket.end();
    const rest: string[] = [];
    for await (const item of anchor) rest.push(item);
    expect(rest).toEqual(['y']);
    await within(peer.closed, 2_000, 'the connection to close');
    expect(peer.frames).toEqual([new Uint8Array([0])]);
  });
});
