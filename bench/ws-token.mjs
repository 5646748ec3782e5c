#!/usr/bin/env node
// Baseline: WebSocket (`ws`, no compression), one `ws.send()` per 64-byte token. Y connections
// (stream s on connection s % Y); the token carries its stream id. The engine is the WebSocket
// server (its frames are unmasked, as a server pushing to connected frontends).
// Usage: node bench/ws-token.mjs [--slots 256] [--peers 1] [--window 8] [--passes 2000] [--warm 2000]
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { WebSocket, WebSocketServer } from 'ws';
import {
  TOKEN,
  pendingAcks,
  connect,
  emit,
  emitAndExit,
  fillToken,
  listen,
  parseArgs,
  passDriver,
  passTracker,
  watchdog,
} from './harness.mjs';

const args = parseArgs();
const slots = Number(args.slots ?? 256);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 2000);
const warm = Number(args.warm ?? 2000);
const window = Number(args.window ?? 8);
const timeoutMs = Number(args.timeout ?? 55_000);

// The receiver (frontends) connects to the sender's server, so here the sender listens: the pair's
// first child is the sender and reports `ready`; the receiver gets its ports.
async function send() {
  watchdog(timeoutMs, 'send');
  const ctrlSrv = net.createServer();
  const ctrlP = new Promise((res) => ctrlSrv.once('connection', (s) => (s.setNoDelay(true), res(s))));
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise((res) => wss.once('listening', res));
  const conns = [];
  const all = new Promise((res) => wss.on('connection', (ws) => conns.push(ws) === peers && res()));
  await emit({ ready: true, wsPort: wss.address().port, ctrlPort: await listen(ctrlSrv) });
  const [ctrl] = await Promise.all([ctrlP, all]);
  const sendPass = (pass, tS) => {
    for (let s = 0; s < slots; s++) {
      const tok = Buffer.allocUnsafe(TOKEN);
      fillToken(tok, 0, pass, s, tS);
      conns[s % peers].send(tok);
    }
  };
  passDriver({ warm, passes, window, sendPass, ctrl, onDone: (r) => emitAndExit({ role: 'send', ...r }) }).start();
}

async function recv(peer) {
  watchdog(timeoutMs, 'recv');
  const acks = pendingAcks();
  const tracker = passTracker({
    slots,
    warm,
    passes,
    onAck: acks.ack,
    onDone: (r) => emitAndExit({ role: 'recv', ...r }),
  });
  for (let y = 0; y < peers; y++) {
    const ws = new WebSocket(`ws://127.0.0.1:${peer.wsPort}`, { perMessageDeflate: false });
    ws.on('message', (data) => tracker.add(data.readUInt32BE(0), 1, data, 0));
    ws.on('error', (e) => emitAndExit({ role: 'recv', error: String(e) }, 1));
    await new Promise((res) => ws.once('open', res));
  }
  acks.attach(await connect(peer.ctrlPort));
}

const script = fileURLToPath(import.meta.url);
const common = [
  '--slots',
  String(slots),
  '--peers',
  String(peers),
  '--passes',
  String(passes),
  '--warm',
  String(warm),
  '--window',
  String(window),
];
// pairMain starts 'recv' first; here the sender must listen first, so swap the role names.
if (args.role === 'send') await send();
else if (args.role === 'recv') await recv(JSON.parse(args.peer));
else {
  const { runPair, finalizePass } = await import('./harness.mjs');
  const r = await runPair(
    script,
    [...common, '--timeout', String(timeoutMs), '--role', 'send'],
    [...common, '--timeout', String(timeoutMs), '--role', 'recv'],
    timeoutMs + 5000,
  );
  const out = finalizePass(r, slots, passes);
  await emitAndExit({ bench: 'ws-per-token', slots, peers, passes, warm, window, ...out }, out.error ? 1 : 0);
}
