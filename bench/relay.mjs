#!/usr/bin/env node
// What a relay costs per token: the same decode-shaped workload once direct (engine → browser, one
// hop) and once relayed (engine → frontend → browser, `openRelay` on the frontend), in paired,
// interleaved rounds (direct, relay, relay, direct, …) so a drift of the machine's speed hits both.
// Every node lives in this process, over the memory transport by default (the library's cost, not
// the kernel's) or loopback TCP with --transport tcp; CPU is the whole process (all nodes).
//
// The engine emits one token per stream per pass, at most --window passes ahead of the slowest
// reader; the browser reads in push mode and checks every token's order. Per round: tokens/s and CPU
// µs per token over the timed passes (after --warm passes), and for the relay the most records the
// frontend held for one stream (`relay.held`, sampled every pass).
// Prints one row per run, the medians, the pairwise median ratios relay/direct, then one JSON line.
// Usage: node bench/relay.mjs [--streams 64] [--passes 1000] [--warm 100] [--rounds 10] [--window 8]
//        [--credit 32] [--transport memory|tcp] [--timeout 120000]
import { dist, emitAndExit, median, parseArgs, round, watchdog } from './harness.mjs';

const args = parseArgs();
const STREAMS = Number(args.streams ?? 64);
const PASSES = Number(args.passes ?? 1000);
const WARM = Number(args.warm ?? 100);
const ROUNDS = Number(args.rounds ?? 10);
const WINDOW = Number(args.window ?? 8);
const CREDIT = Number(args.credit ?? 32);
const TRANSPORT = args.transport ?? 'memory';
for (const [k, v, min] of [
  ['streams', STREAMS, 1],
  ['passes', PASSES, 1],
  ['warm', WARM, 0],
  ['rounds', ROUNDS, 1],
  ['window', WINDOW, 1],
  ['credit', CREDIT, 1],
])
  if (!(Number.isInteger(v) && v >= min)) throw new Error(`--${k} must be an integer >= ${min}, got ${v}`);
if (TRANSPORT !== 'memory' && TRANSPORT !== 'tcp')
  throw new Error(`--transport must be memory or tcp, got ${TRANSPORT}`);
if (WARM >= PASSES) throw new Error('--warm must be below --passes');
watchdog(Number(args.timeout ?? 120_000), 'relay');

const { createNode, openRelay } = await dist('index.js');
const { createMemoryNetwork, memoryTransport } = await dist('adapters/memory.js');
const { tcpTransport } = TRANSPORT === 'tcp' ? await dist('adapters/node-tcp.js') : {};

const mux = { initialCredit: CREDIT };
let names = 0;
/** A listening node and a factory of nodes that dial it. */
async function listener() {
  if (TRANSPORT === 'tcp') {
    const node = await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })], mux });
    return {
      node,
      address: node.address,
      dialler: () => createNode({ transports: [tcpTransport({ listen: false })], mux }),
    };
  }
  const network = createMemoryNetwork();
  const name = `relay-bench-${names++}`;
  const node = await createNode({ transports: [memoryTransport({ network, name })], mux });
  return {
    node,
    address: `memory://${name}`,
    dialler: () => createNode({ transports: [memoryTransport({ network, listen: false })], mux }),
  };
}

const yieldMacrotask = () => new Promise((r) => setImmediate(r));

/** One run: `relayed` false = engine → browser, true = engine → frontend → browser. */
async function run(relayed) {
  const nodes = [];
  let engine;
  let browser;
  let frontend = null;
  if (relayed) {
    const l = await listener();
    frontend = l.node;
    engine = await l.dialler();
    browser = await l.dialler();
    await engine.connect(l.address);
    await browser.connect(l.address);
    nodes.push(frontend, engine, browser);
  } else {
    const l = await listener();
    browser = l.node;
    engine = await l.dialler();
    await engine.connect(l.address);
    nodes.push(browser, engine);
  }
  const received = new Int32Array(STREAMS);
  let fault = null;
  let ended = 0;
  let onEnded = null;
  const senders = [];
  const relays = [];
  for (let i = 0; i < STREAMS; i++) {
    const anchor = browser.createAnchor();
    anchor.consume({
      item(v) {
        const n = received[i];
        // Tokens are `${pass}` strings: a cheap order check.
        if (v.length !== String(n).length) fault ??= `stream ${i}: token ${n} is ${v}`;
        received[i] = n + 1;
      },
      end(error) {
        if (error !== null) fault ??= `stream ${i} ended with ${error.code} ${error.message}`;
        if (++ended === STREAMS) onEnded?.();
      },
    });
    if (relayed) {
      const r = await openRelay(frontend, anchor.handle);
      relays.push(r);
      senders.push(await engine.attachAnchor(r.source.handle));
    } else {
      senders.push(await engine.attachAnchor(anchor.handle));
    }
  }
  const slowest = () => {
    let m = received[0];
    for (let i = 1; i < STREAMS; i++) if (received[i] < m) m = received[i];
    return m;
  };
  let cpu0 = null;
  let t0 = 0;
  let maxHeld = 0;
  for (let pass = 0; pass < PASSES; pass++) {
    if (pass === WARM) {
      // Timed from here: wait until the warm-up passes are read, so they are not counted.
      while (slowest() < WARM) await yieldMacrotask();
      cpu0 = process.cpuUsage();
      t0 = performance.now();
    }
    while (pass - slowest() >= WINDOW) await yieldMacrotask();
    const tok = String(pass);
    for (let i = 0; i < STREAMS; i++) {
      const s = senders[i];
      if (!s.trySend(tok)) await s.send(tok);
    }
    if (relayed) for (const r of relays) if (r.held > maxHeld) maxHeld = r.held;
    await yieldMacrotask();
  }
  while (slowest() < PASSES) await yieldMacrotask();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const done = new Promise((r) => (onEnded = r));
  for (const s of senders) await s.finalize();
  if (ended < STREAMS) await done;
  await Promise.all(nodes.map((n) => n.close()));
  if (fault !== null) throw new Error(fault);
  const tokens = (PASSES - WARM) * STREAMS;
  return {
    mode: relayed ? 'relay' : 'direct',
    tokens_per_s: Math.round(tokens / (wall / 1000)),
    cpu_us_per_token: round((cpu.user + cpu.system) / tokens),
    ...(relayed ? { max_held: maxHeld, held_bound: CREDIT + 1 } : {}),
  };
}

const pairs = [];
const line = (r) =>
  `${r.mode.padEnd(7)} ${String(r.tokens_per_s).padStart(9)} tokens/s ${r.cpu_us_per_token.toFixed(3).padStart(8)} µs CPU/token` +
  (r.max_held !== undefined ? `  held ≤ ${r.max_held} (bound ${r.held_bound})` : '');
// Warm the JIT on both paths before the first pair.
for (let k = 0; k < 2; k++) {
  await run(false);
  await run(true);
}
for (let k = 0; k < ROUNDS; k++) {
  // Alternate which side goes first.
  const first = await run(k % 2 === 1);
  const second = await run(k % 2 === 0);
  const pair = first.mode === 'direct' ? { direct: first, relay: second } : { direct: second, relay: first };
  pairs.push(pair);
  process.stdout.write(`round ${k + 1}: ${line(pair.direct)}\n         ${line(pair.relay)}\n`);
}
const med = (side, key) => median(pairs.map((p) => p[side][key]));
const ratio = (key) => round(median(pairs.map((p) => p.relay[key] / p.direct[key])), 3);
const summary = {
  streams: STREAMS,
  passes: PASSES,
  warm: WARM,
  rounds: ROUNDS,
  window: WINDOW,
  credit: CREDIT,
  transport: TRANSPORT,
  direct: {
    tokens_per_s: Math.round(med('direct', 'tokens_per_s')),
    cpu_us_per_token: round(med('direct', 'cpu_us_per_token')),
  },
  relay: {
    tokens_per_s: Math.round(med('relay', 'tokens_per_s')),
    cpu_us_per_token: round(med('relay', 'cpu_us_per_token')),
    max_held: Math.max(...pairs.map((p) => p.relay.max_held)),
    held_bound: CREDIT + 1,
  },
  ratio_relay_over_direct: { tokens_per_s: ratio('tokens_per_s'), cpu_us_per_token: ratio('cpu_us_per_token') },
  relay_overhead_cpu_us_per_token: round(
    median(pairs.map((p) => p.relay.cpu_us_per_token - p.direct.cpu_us_per_token)),
  ),
};
process.stdout.write(
  `median: direct ${summary.direct.tokens_per_s} tokens/s, ${summary.direct.cpu_us_per_token} µs/token; ` +
    `relay ${summary.relay.tokens_per_s} tokens/s, ${summary.relay.cpu_us_per_token} µs/token\n` +
    `relay / direct: ${summary.ratio_relay_over_direct.tokens_per_s}× tokens/s, ${summary.ratio_relay_over_direct.cpu_us_per_token}× CPU per token ` +
    `(+${summary.relay_overhead_cpu_us_per_token} µs per token)\n`,
);
await emitAndExit(summary);
