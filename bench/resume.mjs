#!/usr/bin/env node
// Resume after a lost link (docs/protocol.md §8.3): how long K mux streams pause when the TCP link
// under them is cut. Two nodes in this process, the producer dialling the consumer through a small
// in-script TCP proxy that can cut every connection; the producer's own re-dial
// (`reconnect: { initialDelayMs: --delay-ms, jitterMs: 0 }`) brings the link back. K streams each send
// numbered items (one every --interval-ms, 0 = as fast as credit allows). Each of --cuts rounds: let
// items flow for a random 0..--gap-ms, cut, then measure
//   link_ms   cut → the producer's onPeerState 'resumed' (or 'up') for the consumer
//   streams_ms cut → every stream has delivered an item the producer handed over after the cut
// At the end every stream is finalized and checked exact (its items 0..sent-1, in order, once each).
// Prints p50/p99/max of both in ms, then one JSON line.
// Usage: node bench/resume.mjs [--streams 64] [--cuts 200] [--delay-ms 0] [--interval-ms 1] [--gap-ms 10]
//        [--cut-timeout-ms 10000] [--timeout 300000]
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { dist, emitAndExit, now, parseArgs, pct, round, watchdog } from './harness.mjs';

const args = parseArgs();
const STREAMS = Number(args.streams ?? 64);
const CUTS = Number(args.cuts ?? 200);
const DELAY = Number(args['delay-ms'] ?? 0);
const INTERVAL = Number(args['interval-ms'] ?? 1);
const GAP = Number(args['gap-ms'] ?? 10);
const CUT_TIMEOUT = Number(args['cut-timeout-ms'] ?? 10_000);
for (const [k, v, min] of [
  ['streams', STREAMS, 1],
  ['cuts', CUTS, 1],
  ['delay-ms', DELAY, 0],
  ['interval-ms', INTERVAL, 0],
  ['gap-ms', GAP, 0],
  ['cut-timeout-ms', CUT_TIMEOUT, 1],
])
  if (!(Number.isInteger(v) && v >= min)) throw new Error(`--${k} must be an integer >= ${min}, got ${v}`);
watchdog(Number(args.timeout ?? 300_000), 'resume');

/** A proxy to 127.0.0.1:`target`; `cut()` destroys both ends of every open connection (a lost link). */
async function proxy(target) {
  const pairs = new Set();
  const server = net.createServer((front) => {
    const back = net.connect(target, '127.0.0.1');
    front.setNoDelay(true);
    back.setNoDelay(true);
    const pair = { front, back };
    pairs.add(pair);
    front.pipe(back);
    back.pipe(front);
    front.on('error', () => {});
    back.on('error', () => {});
    const kill = () => {
      pairs.delete(pair);
      front.destroy();
      back.destroy();
    };
    front.on('close', kill);
    back.on('close', kill);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: `tcp://127.0.0.1:${server.address().port}`,
    cut() {
      const n = pairs.size;
      for (const p of [...pairs]) {
        pairs.delete(p);
        p.front.destroy();
        p.back.destroy();
      }
      return n;
    },
    close: () => {
      for (const p of pairs) p.front.destroy(), p.back.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

const { createNode } = await dist('index.js');
const { tcpTransport } = await dist('adapters/node-tcp.js');
const consumer = await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })] });
const producer = await createNode({ transports: [tcpTransport({ listen: false })] });
const link = await proxy(Number(new URL(consumer.address.replace('tcp://', 'http://')).port));

// Producer's view of the link: resolve the waiter on the next 'up'/'resumed' of the consumer.
let peer = null;
let onBack = null;
let linkBack = false;
let downs = 0;
producer.onPeerState((e) => {
  if (peer !== null && e.peer !== peer) return;
  if (e.type === 'down') downs++;
  if ((e.type === 'resumed' || e.type === 'up') && onBack !== null) {
    linkBack = true;
    onBack(now());
  }
});
peer = await producer.connect(link.address, { reconnect: { initialDelayMs: DELAY, jitterMs: 0 } });

// Consumer side: per stream, items received; each must be the next number (exactness checked online).
const received = new Int32Array(STREAMS);
let fault = null;
// The current cut: the item count each stream must pass, and how many streams have not yet passed it.
const mark = new Int32Array(STREAMS);
const passed = new Uint8Array(STREAMS);
let pending = 0;
let onAllPast = null;
async function read(anchor, i) {
  try {
    for await (const v of anchor) {
      const n = received[i];
      if (v !== n) {
        fault ??= `stream ${i}: item ${n} is ${JSON.stringify(v)}`;
        continue;
      }
      received[i] = n + 1;
      if (pending > 0 && n + 1 > mark[i] && !passed[i]) {
        passed[i] = 1;
        if (--pending === 0 && onAllPast !== null) onAllPast(now());
      }
    }
  } catch (error) {
    fault ??= `stream ${i} ended with ${error?.code ?? ''} ${error?.message ?? error}`;
  }
}

let stopping = false;
// Per stream, items handed to send() (counted before the send resolves).
const handed = new Int32Array(STREAMS);
async function produce(sender, k) {
  let i = 0;
  try {
    while (!stopping) {
      handed[k] = i + 1;
      await sender.send(i++);
      if (INTERVAL > 0) await sleep(INTERVAL);
    }
    await sender.finalize();
    return i;
  } catch (error) {
    fault ??= `sender failed after ${i} items: ${error?.code ?? ''} ${error?.message ?? error}`;
    return -1;
  }
}

const anchors = Array.from({ length: STREAMS }, () => consumer.createAnchor());
const senders = await Promise.all(anchors.map((a) => producer.attachAnchor(a.handle)));
const reads = anchors.map((a, i) => read(a, i));
const writes = senders.map((s, k) => produce(s, k));

// Resolves with `p`'s value, or null after --cut-timeout-ms (its timer cleared either way).
function within(p) {
  let timer;
  const late = new Promise((r) => (timer = setTimeout(() => r(null), CUT_TIMEOUT)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

const linkMs = [];
const streamsMs = [];
await sleep(50); // every stream flowing before the first cut
for (let cut = 0; cut < CUTS; cut++) {
  if (fault !== null) break;
  if (GAP > 0) await sleep(Math.floor(Math.random() * (GAP + 1)));
  linkBack = false;
  const back = new Promise((r) => (onBack = r));
  const past = new Promise((r) => (onAllPast = r));
  // Past what the producer had handed over at the cut: an item sent after it, over the new link
  // (items already on the wire when the link dropped do not count).
  mark.set(handed);
  passed.fill(0);
  pending = STREAMS;
  const t0 = now();
  if (link.cut() === 0) throw new Error(`cut ${cut}: no connection to cut`);
  const got = await within(Promise.all([back, past]));
  if (got === null) {
    const stuck = [];
    for (let i = 0; i < STREAMS; i++) if (received[i] <= mark[i]) stuck.push(i);
    fault ??= `cut ${cut}: not back within ${CUT_TIMEOUT} ms (link ${linkBack ? 'back' : 'not back'}, ${stuck.length} streams without a new item)`;
    break;
  }
  const [tBack, tPast] = got;
  onBack = null;
  onAllPast = null;
  linkMs.push(tBack - t0);
  streamsMs.push(tPast - t0);
}

stopping = true;
const sent = (await within(Promise.all(writes))) ?? senders.map(() => -1);
await within(Promise.all(reads));
for (let i = 0; i < STREAMS && fault === null; i++)
  if (sent[i] !== received[i]) fault = `stream ${i}: sent ${sent[i]}, received ${received[i]}`;

const m = {
  ...producer.metrics(),
  ...Object.fromEntries(Object.entries(consumer.metrics()).map(([k, v]) => [`c:${k}`, v])),
};
const failed = Object.entries(m)
  .filter(([k]) => k.includes('resume_failed_total'))
  .reduce((s, [, v]) => s + v, 0);
const items = sent.reduce((s, n) => s + Math.max(0, n), 0);
await producer.close();
await consumer.close();
await link.close();

const sum = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: round(pct(s, 50), 3), p99: round(pct(s, 99), 3), max: round(s[s.length - 1] ?? NaN, 3) };
};
const a = sum(linkMs);
const b = sum(streamsMs);
const exact = fault === null;
console.log(
  `resume: ${STREAMS} streams, ${linkMs.length}/${CUTS} cuts, re-dial delay ${DELAY} ms, send interval ${INTERVAL} ms`,
);
console.log(`  (a) cut → link back (producer 'resumed'): p50 ${a.p50}  p99 ${a.p99}  max ${a.max} ms`);
console.log(`  (b) cut → every stream past its cut item:   p50 ${b.p50}  p99 ${b.p99}  max ${b.max} ms`);
console.log(
  `  exact: ${exact ? 'yes' : `NO (${fault})`}; ${items} items; resumed streams (producer) ${m['velo_streaming_resumed_streams_total'] ?? 0}; resume failures ${failed}; downs ${downs}`,
);
await emitAndExit(
  {
    bench: 'resume',
    streams: STREAMS,
    cuts: linkMs.length,
    delay_ms: DELAY,
    interval_ms: INTERVAL,
    link_ms: a,
    streams_ms: b,
    exact,
    ...(exact ? {} : { fault }),
    items,
    resumed_streams: m['velo_streaming_resumed_streams_total'] ?? 0,
    resume_failed: failed,
    downs,
  },
  exact && linkMs.length === CUTS ? 0 : 1,
);
