/**
 * The consumer's heartbeat watchdog on the per-stream path (`tcp-stream`), and the producer's idle
 * heartbeats that keep a healthy quiet stream alive. Real loopback TCP for the stream, the
 * in-process LoopMessenger pair for the control plane, a 50 ms heartbeat interval; the waits are
 * on the frames themselves (heartbeats counted as writes), never on a sleep.
 */
import { describe, it, expect, afterEach } from 'vitest';
import type net from 'node:net';
import { isLanemuxError } from '../../src/errors.ts';
import { ATTACH_HANDLER, MPSC_ATTACH_HANDLER, u128 } from '../../src/stream/attach-messages.ts';
import { TCP_STREAM_KEY } from '../../src/wire/constants.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { encodeFrame } from '../../src/wire/frame.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { rawPeer, type RawPeer } from '../transport/raw-peer.ts';
import { within } from '../transport/helpers.ts';
import { waitFor } from '../support/wait-for.ts';

const HEARTBEAT_MS = 50;
const nodes: LanemuxNode[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const n of nodes.splice(0)) await n.close();
});

/** Two nodes over tcp-stream only (mux off), the consumer advertising a 50 ms heartbeat interval. */
async function pair() {
  const [a, b] = LoopMessenger.pair();
  const consumer = await createNode({
    messenger: a,
    perStream: tcpStreamTransport(),
    mux: { enabled: false, heartbeatInterval: HEARTBEAT_MS },
  });
  nodes.push(consumer);
  const producer = await createNode({ messenger: b, perStream: tcpStreamTransport(), mux: { enabled: false } });
  nodes.push(producer);
  return { a, b, consumer, producer };
}

interface Answer {
  Ok: { streaming_transport_key: string; heartbeat_interval_ms: number; routing_session_id: string; endpoint: string };
}

/** Play an old-style producer by hand: attach over the control plane, dial, write the preface. */
async function rawProducer(b: LoopMessenger, a: LoopMessenger, handle: string, mpsc = false): Promise<RawPeer> {
  const h = parseHandle(handle);
  const answer = (await b.request(a.self.id, mpsc ? MPSC_ATTACH_HANDLER : ATTACH_HANDLER, {
    handle: u128(h.workerId, h.localId),
    supported_transport_keys: [TCP_STREAM_KEY],
  })) as Answer;
  expect(answer.Ok.streaming_transport_key).toBe(TCP_STREAM_KEY);
  expect(answer.Ok.heartbeat_interval_ms).toBe(HEARTBEAT_MS);
  const peer = await rawPeer(answer.Ok.endpoint, sockets, false);
  const preface = Buffer.alloc(16);
  preface.writeBigUInt64BE(h.localId, 0);
  preface.writeBigUInt64BE(BigInt(answer.Ok.routing_session_id), 8);
  peer.socket.write(preface);
  return peer;
}

describe('per-stream path: the heartbeat watchdog', () => {
  it('a producer that writes one frame and then goes quiet with its socket open is dropped: ERR_SENDER_DROPPED (retryable), socket closed, one watchdog firing', async () => {
    const { a, b, consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const peer = await rawProducer(b, a, anchor.handle);
    peer.send(encodeFrame({ kind: 'Item', value: 'only' }));
    const first = await within(anchor.next(), 2_000, 'the first item');
    expect(first).toEqual({ done: false, value: 'only' });
    // Nothing more, the socket stays open: three silent 50 ms windows end the stream.
    const error = await within(
      anchor.next().then(
        () => null,
        (e: unknown) => e,
      ),
      2_000,
      'the silent stream to be dropped',
    );
    expect(isLanemuxError(error, 'ERR_SENDER_DROPPED')).toBe(true);
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    await within(peer.closed, 2_000, 'the consumer to close the quiet connection');
    expect(consumer.metricsRegistry.watchdogFirings).toBe(1);
    expect(consumer.metrics()['velo_streaming_heartbeat_watchdog_firings_total']).toBe(1);
  });

  it('a quiet MPSC sender is dropped the same way (a dropped event, its socket closed) and, as on the mux, counts no watchdog firing', async () => {
    const { a, b, consumer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const peer = await rawProducer(b, a, anchor.handle, true);
    peer.send(encodeFrame({ kind: 'Item', value: 'only' }));
    const first = await within(anchor.next(), 2_000, 'the first event');
    expect(first.value).toMatchObject({ kind: 'item', value: 'only' });
    const second = await within(anchor.next(), 2_000, 'the quiet sender to be dropped');
    expect(second.value).toMatchObject({ kind: 'dropped' });
    expect(isLanemuxError((second.value as { error?: unknown }).error, 'ERR_SENDER_DROPPED')).toBe(true);
    await within(peer.closed, 2_000, 'the consumer to close the quiet connection');
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
  });

  it('a healthy producer that stays idle for twenty heartbeat windows is not dropped: its idle heartbeats keep the stream', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    expect(sender.negotiatedTransport).toBe(TCP_STREAM_KEY);
    await sender.send('before');
    expect(await within(anchor.next(), 2_000, 'the first item')).toEqual({ done: false, value: 'before' });
    const written = producer.perStreamWrites;
    // Every write from here on is an idle heartbeat: twenty of them span about twenty windows.
    await waitFor(() => producer.perStreamWrites >= written + 20, 5_000, 'twenty idle heartbeats');
    expect(sender.closed).toBe(false);
    expect(sender.cancelSignal.aborted).toBe(false);
    await sender.send('after');
    await sender.finalize();
    const rest: string[] = [];
    for await (const item of anchor) rest.push(item);
    expect(rest).toEqual(['after']);
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
  });

  it('a producer the consumer holds back (buffer full, nobody reading) is not dropped while it waits', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    // More than the anchor's channel holds (256): the consumer's reader pauses, the rest waits in the socket.
    const items = Array.from({ length: 300 }, (_, i) => `i${i}`);
    for (const item of items) await sender.send(item);
    const written = producer.perStreamWrites;
    await waitFor(() => producer.perStreamWrites >= written + 10, 5_000, 'ten idle heartbeats behind the full buffer');
    await sender.finalize();
    const got: string[] = [];
    for await (const item of anchor) got.push(item);
    expect(got).toEqual(items);
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
  });

  it('a producer idle with nothing sent yet heartbeats too: the stream survives before its first item', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await waitFor(() => producer.perStreamWrites >= 10, 5_000, 'ten idle heartbeats');
    await sender.send('late');
    await sender.finalize();
    const got: string[] = [];
    for await (const item of anchor) got.push(item);
    expect(got).toEqual(['late']);
  });
});
