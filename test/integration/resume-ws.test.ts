// Over WebSocket: streams resume across many lost links (docs/protocol.md §8.3), in the browser's
// shape: the WebSocket client (partysocket) consumes, the `ws` server produces. The server side of the
// link is cut (its TCP socket destroyed, the server left listening) 20 times at seeded random moments
// while 64 streams flow; the client's dial reconnects by itself. Every stream ends with exactly its
// items, in order; none hangs; live slots return to 0 on both sides.
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { flowingStreams } from '../support/flowing-streams.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { waitFor } from '../support/wait-for.ts';
import { closeAll, open } from './helpers.ts';

const httpServers: Server[] = [];

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    for (const h of httpServers.splice(0)) {
      h.closeAllConnections();
      await new Promise<void>((r) => h.close(() => r()));
    }
  }
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

/** A `ws` server node on our own HTTP server, whose TCP sockets the test can destroy. */
async function wsServerNode(): Promise<{ node: LanemuxNode; cut: () => number }> {
  const http = createServer((_req, res) => {
    res.statusCode = 404;
    res.end();
  });
  httpServers.push(http);
  const sockets = new Set<Socket>();
  http.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const node = await createNode({ transports: [webSocketServerTransport({ server: http })] });
  open.push(node);
  return {
    node,
    cut: () => {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      return n;
    },
  };
}

/**
 * 64 streams flow while the ws server loses its sockets `cuts` times. `settle`: every stream has
 * resumed before the next cut (pauses up to 100 ms); otherwise the next cut lands within 15 ms of the
 * link coming back, while resumes are still being asked and answered (answers lost with the link).
 */
async function cutsWhileStreaming(cuts: number, seed: number, settle: boolean): Promise<void> {
  const CUTS = cuts;
  const random = seededRandom(seed);
  const server = await wsServerNode();
  const producer = server.node;
  const consumer = await createNode({
    transports: [
      webSocketClientTransport({
        WebSocket: WebSocket as never,
        minReconnectionDelay: 10,
        reconnectionJitter: 20,
        maxReconnectionDelay: 200,
      }),
    ],
  });
  open.push(consumer);
  await consumer.connect(producer.address);
  // Timer-paced producers: a 1 ms pause after every 4 items.
  const flow = await flowingStreams(consumer, producer, { pauseEvery: 4 });
  let upAt = 0;
  const off = producer.onPeerState((e) => {
    if (e.type === 'up' || e.type === 'resumed') upAt = performance.now();
  });
  const resumed = (): number => metric(producer, 'streaming_resumed_streams_total');
  const linkBack: number[] = [];
  const allResumed: number[] = [];
  let ups = 0;
  const offUps = producer.onPeerState((e) => {
    if (e.type === 'up' || e.type === 'resumed') ups++;
  });
  for (let cut = 0; cut < CUTS; cut++) {
    // A random pause, then the server loses the link.
    await new Promise((r) => setTimeout(r, Math.floor(random() * (settle ? 100 : 15))));
    const t0 = performance.now();
    const before = ups;
    expect(server.cut()).toBeGreaterThan(0);
    if (!settle) {
      // The client dials again by itself; the next cut comes as soon as the link is back.
      await waitFor(() => ups > before, 10_000, `link back after cut ${cut}`);
      continue;
    }
    // Every stream resumes (its replay sent, it flows on the new link) before the next cut.
    await waitFor(() => resumed() === 64 * (cut + 1), 10_000, `every stream resumed after cut ${cut}`);
    allResumed.push(performance.now() - t0);
    linkBack.push(upAt - t0);
  }
  offUps();
  off();
  const p50 = (xs: number[]): string => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(0);
  if (settle)
    console.log(
      `[resume ws] 64 streams, ${CUTS} cuts; after a cut: link back p50 ${p50(linkBack)} ms, max ${Math.max(...linkBack).toFixed(0)} ms; every stream resumed p50 ${p50(allResumed)} ms, max ${Math.max(...allResumed).toFixed(0)} ms`,
    );
  await flow.finish();
  // Every cut suspended every stream (none had ended) and each was resumed once, on both sides.
  for (const n of [producer, consumer]) {
    // A cut that lands mid-resume resumes some streams once for two cuts.
    if (settle) expect(metric(n, 'streaming_resumed_streams_total')).toBe(64 * CUTS);
    else expect(metric(n, 'streaming_resumed_streams_total')).toBeGreaterThanOrEqual(64);
    expect(n.metricsRegistry.resumeFailures.size, JSON.stringify([...n.metricsRegistry.resumeFailures])).toBe(0);
  }
  if (settle) expect(metric(producer, 'streaming_mux_epoch_deaths_total')).toBe(CUTS);
  await waitFor(() => consumer.metricsRegistry.liveSlots === 0 && producer.metricsRegistry.liveSlots === 0);
}

describe('resume over WebSocket', () => {
  it(
    'the ws server loses its sockets 20 times at random moments while 64 streams flow: every stream exact, live slots 0',
    {
      timeout: 60_000,
    },
    () => cutsWhileStreaming(20, 0x5eed_0001, true),
  );

  it(
    '40 cuts each within 15 ms of the link coming back, while resumes are being answered: every stream still exact, none fails',
    {
      timeout: 90_000,
    },
    () => cutsWhileStreaming(40, 1, false),
  );
});
