#!/usr/bin/env node
// Added latency of a lone stream: one 64-byte token every 10 ms on a single stream, sender and
// receiver in separate processes; one-way latency = receive time − send stamp (common clock).
//   --mode raw            a plain node:net socket, one write per token (the floor)
//   --mode auto           lanemux Auto { onAdmission: true } (the default)
//   --mode linger         Auto { onAdmission: false, maxLinger: 2 }
//   --mode linger-complete Auto { onAdmission: false, maxLinger: 2, onComplete: true }
//   --mode manual         Manual, flushBatch() after each send
// Usage: node bench/latency.mjs [--mode auto] [--tokens 300] [--warm 20] [--interval 10]
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  TOKEN,
  dist,
  emit,
  emitAndExit,
  fillToken,
  listen,
  now,
  parseArgs,
  pct,
  round,
  runPair,
  tokenStart,
  watchdog,
  connect,
} from './harness.mjs';

const args = parseArgs();
const mode = args.mode ?? 'auto';
const tokens = Number(args.tokens ?? 300);
const warm = Number(args.warm ?? 20);
const interval = Number(args.interval ?? 10);
const timeoutMs = Number(args.timeout ?? 55_000);
const policies = {
  auto: { kind: 'auto', onAdmission: true },
  linger: { kind: 'auto', onAdmission: false, maxLinger: 2 },
  'linger-complete': { kind: 'auto', onAdmission: false, maxLinger: 2, onComplete: true },
  manual: { kind: 'manual' },
};
if (mode !== 'raw' && !policies[mode]) throw new Error(`--mode raw|${Object.keys(policies).join('|')}, got ${mode}`);
const total = warm + tokens;

async function lanemux(listenOn) {
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  return createNode({
    transports: [listenOn ? tcpTransport({ host: '127.0.0.1', port: 0 }) : tcpTransport({ listen: false })],
    mux: { flushPolicy: policies[mode] },
  });
}

async function recv() {
  watchdog(timeoutMs, 'recv');
  const lats = [];
  let seen = 0;
  const onToken = (tok, off = 0) => {
    const lat = now() - tokenStart(tok, off);
    if (seen++ >= warm) lats.push(lat);
    if (seen === total) {
      lats.sort((a, b) => a - b);
      emitAndExit({
        role: 'recv',
        latency_p50_ms: round(pct(lats, 50), 4),
        latency_p99_ms: round(pct(lats, 99), 4),
        latency_max_ms: round(lats[lats.length - 1], 4),
      });
    }
  };
  if (mode === 'raw') {
    const srv = net.createServer((sock) => {
      sock.setNoDelay(true);
      let pend = Buffer.alloc(0);
      sock.on('data', (d) => {
        pend = Buffer.concat([pend, d]);
        let off = 0;
        for (; pend.length - off >= TOKEN; off += TOKEN) onToken(pend, off);
        pend = pend.subarray(off);
      });
    });
    return emit({ ready: true, port: await listen(srv) });
  }
  const node = await lanemux(true);
  const anchor = node.createAnchor();
  (async () => {
    for await (const tok of anchor) onToken(tok);
  })().catch((e) => emitAndExit({ role: 'recv', error: String(e) }, 1));
  await emit({ ready: true, address: node.address, handle: anchor.handle });
}

async function send(peer) {
  watchdog(timeoutMs, 'send');
  let write;
  if (mode === 'raw') {
    const sock = await connect(peer.port);
    write = (tok) => sock.write(tok);
  } else {
    const engine = await lanemux(false);
    await engine.connect(peer.address);
    const s = await engine.attachAnchor(peer.handle);
    write = (tok) => {
      s.send(tok);
      if (mode === 'manual') engine.flushBatch();
    };
  }
  let i = 0;
  const tick = () => {
    const tok = Buffer.allocUnsafe(TOKEN);
    fillToken(tok, 0, i, 0, now());
    write(tok);
    if (++i < total) setTimeout(tick, interval);
    else emit({ role: 'send' });
  };
  tick();
}

if (args.role === 'recv') await recv();
else if (args.role === 'send') await send(JSON.parse(args.peer));
else {
  const common = [
    '--mode',
    mode,
    '--tokens',
    String(tokens),
    '--warm',
    String(warm),
    '--interval',
    String(interval),
    '--timeout',
    String(timeoutMs),
  ];
  const script = fileURLToPath(import.meta.url);
  const r = await runPair(script, [...common, '--role', 'recv'], [...common, '--role', 'send'], timeoutMs + 5000);
  delete r.role;
  await emitAndExit({ bench: `latency-${mode}`, mode, tokens, interval_ms: interval, ...r }, r.error ? 1 : 0);
}
