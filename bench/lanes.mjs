#!/usr/bin/env node
// Lane scaling over Node TCP: 64 streams of 16 KiB items between two processes, `--lanes` ordered
// lanes per peer (one TCP connection each); stream s is placed with laneKey s. Each stream sends
// `--items` items with `await send()` and finalizes; the consumer reads every stream to its end.
// MB/s = payload bytes / (first send → last item read); CPU = both processes over that span.
// Usage: node bench/lanes.mjs [--lanes 1] [--streams 64] [--items 200] [--item 16384]
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  connect,
  cpuUs,
  dist,
  emit,
  emitAndExit,
  listen,
  now,
  parseArgs,
  round,
  runPair,
  watchdog,
} from './harness.mjs';

const args = parseArgs();
const lanes = Number(args.lanes ?? 1);
const streams = Number(args.streams ?? 64);
const items = Number(args.items ?? 200);
const itemBytes = Number(args.item ?? 16384);
const timeoutMs = Number(args.timeout ?? 55_000);

async function node(listenOn) {
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  return createNode({
    transports: [listenOn ? tcpTransport({ host: '127.0.0.1', port: 0 }) : tcpTransport({ listen: false })],
    lanes,
  });
}

async function recv() {
  watchdog(timeoutMs, 'recv');
  const consumer = await node(true);
  const anchors = Array.from({ length: streams }, () => consumer.createAnchor());
  let cpu0 = null;
  let t0 = 0;
  const ctrlSrv = net.createServer((sock) =>
    sock.once('data', () => {
      cpu0 = process.cpuUsage();
      t0 = now();
      sock.write('go');
    }),
  );
  let bytes = 0;
  Promise.all(
    anchors.map(async (a) => {
      for await (const it of a) bytes += it.length;
    }),
  ).then(
    () => {
      const wall = now() - t0;
      emitAndExit({
        role: 'recv',
        bytes,
        wall_ms: round(wall),
        mb_per_s: round(bytes / 1e6 / (wall / 1000), 1),
        _recv_cpu: cpuUs(process.cpuUsage(cpu0)),
      });
    },
    (e) => emitAndExit({ role: 'recv', error: String(e) }, 1),
  );
  await emit({
    ready: true,
    address: consumer.address,
    ctrlPort: await listen(ctrlSrv),
    handles: anchors.map((a) => a.handle),
  });
}

async function send(peer) {
  watchdog(timeoutMs, 'send');
  const engine = await node(false);
  await engine.connect(peer.address);
  const senders = await Promise.all(peer.handles.map((h, s) => engine.attachAnchor(h, { laneKey: BigInt(s) })));
  const ctrl = await connect(peer.ctrlPort);
  await new Promise((res) => (ctrl.once('data', res), ctrl.write('x')));
  const cpu0 = process.cpuUsage();
  const item = new Uint8Array(itemBytes).fill(0x61);
  await Promise.all(
    senders.map(async (s) => {
      for (let i = 0; i < items; i++) await s.send(item);
      await s.finalize();
    }),
  );
  await emit({ role: 'send', _send_cpu: cpuUs(process.cpuUsage(cpu0)) });
}

if (args.role === 'recv') await recv();
else if (args.role === 'send') await send(JSON.parse(args.peer));
else {
  const common = [
    '--lanes',
    String(lanes),
    '--streams',
    String(streams),
    '--items',
    String(items),
    '--item',
    String(itemBytes),
    '--timeout',
    String(timeoutMs),
  ];
  const script = fileURLToPath(import.meta.url);
  const r = await runPair(script, [...common, '--role', 'recv'], [...common, '--role', 'send'], timeoutMs + 5000);
  const out = { bench: `lanes-${lanes}`, lanes, streams, items, item_bytes: itemBytes };
  if (r.error) out.error = r.error;
  else
    Object.assign(out, {
      mb_per_s: r.mb_per_s,
      wall_ms: r.wall_ms,
      cpu_us_per_item: round((r._recv_cpu + r._send_cpu) / (streams * items), 2),
    });
  await emitAndExit(out, r.error ? 1 : 0);
}
