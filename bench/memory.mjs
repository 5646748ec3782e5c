#!/usr/bin/env node
// Stalled consumer: X streams whose consumer never reads. The producer keeps `await send(item)` on
// every stream until all of them are parked (by credit, or by the receiver's peer window); then each
// side reports its RSS and heap growth (after a full GC; both children run with --expose-gc) since
// the streams were set up, against `peerByteBudget` and against the credit bound X · C · item bytes,
// and the receiver reports the bytes its window counted (held now, and the most held at once).
// Usage: node bench/memory.mjs [--slots 1024] [--item 1024] [--credit 32] [--budget 8388608]
//        node bench/memory.mjs --items 64,4096,61440 [--slots 1024]   one row per item size
// (--items runs the pairs one after the other and prints one JSON line with a `rows` array; a build
// without the peer window reports no window figures, only the growth.)
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  ackWriter,
  connect,
  dist,
  emit,
  emitAndExit,
  listen,
  parseArgs,
  round,
  runPair,
  watchdog,
} from './harness.mjs';

const args = parseArgs();
const slots = Number(args.slots ?? 1024);
const itemBytes = Number(args.item ?? 1024);
const credit = Number(args.credit ?? 32);
const budget = Number(args.budget ?? 8 * 1024 * 1024);
const timeoutMs = Number(args.timeout ?? 55_000);
const mux = { initialCredit: credit, peerByteBudget: budget };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mem = () => {
  globalThis.gc();
  globalThis.gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed + m.arrayBuffers, rss: m.rss };
};
/** Resolves when `count()` has not moved for `quietMs`. */
async function settle(count, quietMs = 300) {
  let last = -1;
  let since = Date.now();
  while (Date.now() - since < quietMs) {
    await sleep(50);
    const c = count();
    if (c !== last) {
      last = c;
      since = Date.now();
    }
  }
  return last;
}
const _received = (node) =>
  node.metrics()['velo_streaming_mux_records_received_total{record_type="data"}'] ??
  node.metricsRegistry.recordsReceived ??
  0;

async function recv() {
  watchdog(timeoutMs, 'recv');
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  const node = await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })], mux });
  const anchors = Array.from({ length: slots }, () => node.createAnchor()); // never read
  let m0 = null;
  const ctrl = net.createServer((sock) => {
    const ack = ackWriter(sock);
    sock.on('data', async (d) => {
      if (d[0] === 1) {
        m0 = mem();
        ack(0);
      } else {
        const m1 = mem();
        const r = node.metricsRegistry;
        await emit({
          role: 'recv',
          recv_heap_growth_bytes: m1.heap - m0.heap,
          recv_rss_growth_bytes: m1.rss - m0.rss,
          recv_buffered: anchors.length,
          recv_records_buffered: anchors.reduce((n, a) => n + (a.bind?.buffer.length ?? 0), 0),
          ...(r.receiveWindowPeakBytes !== undefined
            ? { recv_window_held_bytes: r.receiveWindowHeldBytes, recv_window_peak_bytes: r.receiveWindowPeakBytes }
            : {}),
        });
        process.exit(0);
      }
    });
  });
  await emit({
    ready: true,
    address: node.address,
    ctrlPort: await listen(ctrl),
    handles: anchors.map((a) => a.handle),
  });
}

async function send(peer) {
  watchdog(timeoutMs, 'send');
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  const engine = await createNode({ transports: [tcpTransport({ listen: false })], mux });
  await engine.connect(peer.address);
  const senders = [];
  for (let i = 0; i < peer.handles.length; i += 64)
    senders.push(...(await Promise.all(peer.handles.slice(i, i + 64).map((h) => engine.attachAnchor(h)))));
  const ctrl = await connect(peer.ctrlPort);
  const step = (b) => new Promise((res) => (ctrl.once('data', res), ctrl.write(Buffer.from([b]))));
  await sleep(100);
  const s0 = mem();
  await step(1);
  let sent = 0;
  const item = new Uint8Array(itemBytes).fill(0x61);
  for (const s of senders) {
    (async () => {
      for (;;) {
        await s.send(item);
        sent++;
      }
    })().catch(() => {});
  }
  await settle(() => sent);
  const s1 = mem();
  await emit({
    role: 'send',
    items_sent: sent,
    send_heap_growth_bytes: s1.heap - s0.heap,
    send_rss_growth_bytes: s1.rss - s0.rss,
  });
  ctrl.write(Buffer.from([2]));
}

/** Run one sender/receiver pair for `item`-byte records and merge their figures. */
async function row(item) {
  const common = [
    '--slots',
    String(slots),
    '--item',
    String(item),
    '--credit',
    String(credit),
    '--budget',
    String(budget),
    '--timeout',
    String(timeoutMs),
  ];
  const script = fileURLToPath(import.meta.url);
  const r = await runPair(script, [...common, '--role', 'recv'], [...common, '--role', 'send'], timeoutMs + 5000);
  const out = {
    bench: 'memory-stalled',
    slots,
    item_bytes: item,
    credit,
    peer_byte_budget: budget,
    credit_bound_bytes: slots * credit * item,
    ...r,
  };
  delete out.role;
  delete out.ready;
  if (!r.error) {
    out.recv_growth_vs_budget = round(r.recv_rss_growth_bytes / budget, 3);
    out.send_growth_vs_budget = round(r.send_rss_growth_bytes / budget, 3);
    out.recv_heap_vs_budget = round(r.recv_heap_growth_bytes / budget, 3);
    if (r.recv_window_peak_bytes !== undefined)
      out.recv_window_peak_vs_budget = round(r.recv_window_peak_bytes / budget, 3);
  }
  return out;
}

if (args.role === 'recv') await recv();
else if (args.role === 'send') await send(JSON.parse(args.peer));
else {
  process.env.BENCH_NODE_FLAGS = `${process.env.BENCH_NODE_FLAGS ?? ''} --expose-gc`;
  if (args.items !== undefined) {
    const rows = [];
    for (const item of String(args.items).split(',').map(Number)) rows.push(await row(item));
    await emitAndExit(
      { bench: 'memory-stalled-rows', slots, credit, peer_byte_budget: budget, rows },
      rows.some((x) => x.error) ? 1 : 0,
    );
  } else {
    const out = await row(itemBytes);
    await emitAndExit(out, out.error ? 1 : 0);
  }
}
