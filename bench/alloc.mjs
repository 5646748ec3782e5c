#!/usr/bin/env node
// Bytes allocated per token, by call site, in the decode shape: X streams of 64-byte tokens, one
// token per stream per pass, W passes in flight, both nodes in this one process over loopback TCP
// (sender and receiver sites side by side). V8's sampling heap profiler runs over the timed passes
// and keeps objects the young-generation GC already collected, so short-lived garbage, which sets
// how often the scavenger pauses a pass, is counted too.
//
// Usage (after `npm run build`): node bench/alloc.mjs [--slots 256] [--window 4] [--passes 2000] [--top 20] [--read push|iter]
//   --read iter: each anchor read with `for await` instead of `consume()` (push mode, the default).
import { Session } from 'node:inspector/promises';
import { TOKEN, dist, emitAndExit, parseArgs, round, watchdog } from './harness.mjs';

const args = parseArgs();
const X = Number(args.slots ?? 256);
const W = Number(args.window ?? 4);
const passes = Number(args.passes ?? 2000);
const top = Number(args.top ?? 20);
const read = args.read ?? 'push';
if (read !== 'push' && read !== 'iter') throw new Error(`--read push|iter, got ${read}`);
watchdog(Number(args.timeout ?? 110_000), 'alloc');

const { createNode } = await dist('index.js');
const { tcpTransport } = await dist('adapters/node-tcp.js');
const recv = await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })] });
const send = await createNode({ transports: [tcpTransport({ listen: false })] });
await send.connect(recv.address);
const anchors = Array.from({ length: X }, () => recv.createAnchor());
let got = 0;
if (read === 'iter') {
  // One `for await` loop per anchor: what an application that reads with the async iterator pays.
  for (const a of anchors)
    (async () => {
      for await (const _ of a) got++;
    })();
} else {
  for (const a of anchors)
    a.consume({
      item: () => {
        got++;
      },
    });
}
const senders = [];
for (let i = 0; i < X; i += 64)
  senders.push(...(await Promise.all(anchors.slice(i, i + 64).map((a) => send.attachAnchor(a.handle)))));
// W+1 pass buffers: a token may be held by reference until written (and kept for a resume).
const ring = Array.from({ length: W + 1 }, () => {
  const buf = new Uint8Array(X * TOKEN).fill(0x61);
  return Array.from({ length: X }, (_, s) => buf.subarray(s * TOKEN, (s + 1) * TOKEN));
});
const turn = () => new Promise((r) => setImmediate(r));
const run = async (from, count) => {
  for (let p = from; p < from + count; p++) {
    const views = ring[p % ring.length];
    for (let s = 0; s < X; s++) senders[s].send(views[s]);
    while (got < (p + 1 - W) * X) await turn();
  }
};
await run(0, passes);
const session = new Session();
session.connect();
await session.post('HeapProfiler.enable');
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 256,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
await run(passes, passes);
const { profile } = await session.post('HeapProfiler.stopSampling');

const sites = new Map();
let total = 0;
const name = (cf) =>
  `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/(dist|bench)\//, '$1/')}:${cf.lineNumber + 1}`;
const walk = (node, stack) => {
  const frames = [name(node.callFrame), ...stack];
  if (node.selfSize > 0) {
    const key = frames.slice(0, 3).join(' <- ');
    sites.set(key, (sites.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children ?? []) walk(child, frames);
};
walk(profile.head, []);
const tokens = passes * X;
await emitAndExit({
  bench: 'alloc',
  read,
  slots: X,
  window: W,
  passes,
  bytes_per_token: round(total / tokens, 1),
  sites: [...sites]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([site, bytes]) => ({ bytes_per_token: round(bytes / tokens, 1), site })),
});
