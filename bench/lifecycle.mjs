#!/usr/bin/env node
// Stream lifecycle: open + 4 items of 16 bytes + close, `--conc` streams in flight, over one live
// connection; streams/s and CPU µs per stream. Both nodes live in this one process over loopback
// TCP (as the reference measured its setup cost), so CPU is both sides together.
//   --mode attach     consumer createAnchor(); producer attachAnchor(handle) (one round trip)
//   --mode zero-rtt   consumer createAnchor() + prebindAnchor() → ticket; producer openAnchorStream(handle, ticket)
//   --mode per-stream lanemux's legacy path (mux disabled): attach + one TCP connection per stream
//   --mode yamux      a yamux stream per stream on one TCP connection (open, 4 sends, close; the
//                     remote reads 64 bytes and closes)
// The consumer reads every stream to its end. With --gc (node --expose-gc), heap and RSS are taken
// after the warm-up and at the end, each after a full GC, to show that N streams leave no growth.
// --items 0 measures open + close alone (lanemux modes): what a stream's setup and teardown cost.
// batches_per_stream (lanemux modes): batches both nodes wrote in the timed section, per stream.
// Usage: node [--expose-gc] bench/lifecycle.mjs [--mode attach] [--n 20000] [--warm 2000] [--conc 64] [--items 4]
import net from 'node:net';
import { connect, cpuUs, dist, emitAndExit, listen, now, parseArgs, pct, round, watchdog } from './harness.mjs';
import { messageBytes, yamuxOver } from './yamux-conn.mjs';

const args = parseArgs();
const mode = args.mode ?? 'attach';
const n = Number(args.n ?? 20_000);
const warm = Number(args.warm ?? 2000);
const conc = Number(args.conc ?? 64);
const ITEMS = Number(args.items ?? 4);
const item = new Uint8Array(16).fill(0x61);
watchdog(Number(args.timeout ?? 110_000), 'lifecycle');
if (!['attach', 'zero-rtt', 'per-stream', 'yamux'].includes(mode))
  throw new Error(`--mode attach|zero-rtt|per-stream|yamux, got ${mode}`);
if (!(Number.isInteger(ITEMS) && ITEMS >= (mode === 'yamux' ? 1 : 0)))
  throw new Error(`--items must be an integer >= ${mode === 'yamux' ? 1 : 0}, got ${args.items}`);

async function lanemuxOpener() {
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  const { tcpStreamTransport } = await dist('adapters/node-tcp-stream.js');
  const legacy = mode === 'per-stream';
  const opts = () => (legacy ? { mux: { enabled: false }, perStream: tcpStreamTransport({ host: '127.0.0.1' }) } : {});
  const consumer = await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })], ...opts() });
  const producer = await createNode({ transports: [tcpTransport({ listen: false })], ...opts() });
  await producer.connect(consumer.address);
  const one = async (lat) => {
    const start = now();
    const anchor = consumer.createAnchor();
    const ticket = mode === 'zero-rtt' ? consumer.prebindAnchor(anchor) : undefined;
    const reading = (async () => {
      let got = 0;
      for await (const _ of anchor) if (got++ === 0 && lat) lat.first.push(now() - start);
      if (got !== ITEMS) throw new Error(`stream got ${got} of ${ITEMS} items`);
      if (lat) lat.total.push(now() - start);
    })();
    const sender =
      ticket !== undefined
        ? await producer.openAnchorStream(anchor.handle, ticket)
        : await producer.attachAnchor(anchor.handle);
    for (let i = 0; i < ITEMS; i++) await sender.send(item);
    await sender.finalize();
    await reading;
  };
  const live = () => consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots;
  // Batches both nodes wrote (data, opens, closes, credit and close replies): what a stream's setup costs on the wire.
  const batches = () =>
    [consumer, producer].reduce(
      (n, node) => n + node.metrics()['velo_streaming_mux_batches_total{direction="sent"}'],
      0,
    );
  return { one, live, batches };
}

async function yamuxOpener() {
  const srv = net.createServer((sock) => {
    sock.setNoDelay(true);
    yamuxOver(sock, 'inbound').addEventListener('stream', ({ detail: stream }) => {
      let bytes = 0;
      stream.addEventListener('message', (e) => {
        bytes += messageBytes(e.data).length;
        if (bytes === ITEMS * item.length) stream.close().catch(() => {});
      });
    });
  });
  const muxer = yamuxOver(await connect(await listen(srv)), 'outbound');
  const one = async (lat) => {
    const start = now();
    const stream = await muxer.createStream();
    const closed = new Promise((res) => stream.addEventListener('close', res, { once: true }));
    for (let i = 0; i < ITEMS; i++) stream.send(item);
    await stream.close();
    await closed;
    if (lat) lat.total.push(now() - start);
  };
  return { one, live: () => muxer.streams.length };
}

const pctOf = (xs, p) =>
  pct(
    [...xs].sort((a, b) => a - b),
    p,
  );
const gc = globalThis.gc;
const mem = () => {
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
};

const { one, live, batches } = mode === 'yamux' ? await yamuxOpener() : await lanemuxOpener();
// `conc` workers, each opening streams back to back; warm-up first, then the timed section.
const runMany = async (count, lat) => {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      await one(lat);
    }
  };
  await Promise.all(Array.from({ length: Math.min(conc, count) }, worker));
};
await runMany(warm);
const m0 = mem();
const cpu0 = process.cpuUsage();
const b0 = batches?.() ?? 0;
const t0 = now();
// Per stream, from the open call: first item at the consumer (setup latency) and the whole stream.
const lat = { first: [], total: [] };
await runMany(n, lat);
const wall = now() - t0;
const cpu = cpuUs(process.cpuUsage(cpu0));
const batchCount = (batches?.() ?? 0) - b0;
// Retirement (close records, sweeps) settles shortly after the last stream ends.
for (let i = 0; i < 100 && live() > 0; i++) await new Promise((r) => setTimeout(r, 20));
const m1 = mem();
await emitAndExit({
  bench: `lifecycle-${mode}`,
  mode,
  n,
  warm,
  conc,
  items: ITEMS,
  streams_per_s: Math.round((n / wall) * 1000),
  cpu_us_per_stream: round(cpu / n, 2),
  ...(batches ? { batches_per_stream: round(batchCount / n, 3) } : {}),
  ...(lat.first.length > 0
    ? { first_item_p50_ms: round(pctOf(lat.first, 50)), first_item_p99_ms: round(pctOf(lat.first, 99)) }
    : {}),
  stream_p50_ms: round(pctOf(lat.total, 50)),
  stream_p99_ms: round(pctOf(lat.total, 99)),
  live_after: live(),
  ...(gc ? { heap_growth_bytes: m1.heap - m0.heap, rss_growth_bytes: m1.rss - m0.rss, heap_after_bytes: m1.heap } : {}),
});
