#!/usr/bin/env node
// Baseline: yamux (libp2p, no encryption) in the decode shape. Y TCP connections with one yamux
// session each, X streams (stream s on connection s % Y), one `stream.send()` per 64-byte token.
// The receiver parses each stream's bytes into 64-byte tokens (a stream is a byte pipe).
// Usage: node bench/yamux-bench.mjs [--slots 256] [--peers 1] [--window 8] [--passes 2000] [--warm 2000]
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  TOKEN,
  pendingAcks,
  connect,
  emit,
  emitAndExit,
  fillToken,
  listen,
  pairMain,
  parseArgs,
  passDriver,
  passTracker,
  watchdog,
} from './harness.mjs';
import { messageBytes, yamuxOver } from './yamux-conn.mjs';

const args = parseArgs();
const slots = Number(args.slots ?? 256);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 2000);
const warm = Number(args.warm ?? 2000);
const window = Number(args.window ?? 8);
const timeoutMs = Number(args.timeout ?? 55_000);

async function recv() {
  watchdog(timeoutMs, 'recv');
  const acks = pendingAcks();
  const tracker = passTracker({
    slots,
    warm,
    passes,
    onAck: acks.ack,
    onDone: (r) => emitAndExit({ role: 'recv', ...r }),
  });
  const srv = net.createServer((sock) => {
    sock.setNoDelay(true);
    const muxer = yamuxOver(sock, 'inbound');
    // Attach synchronously: yamux aborts the session when many early streams find no listener.
    muxer.addEventListener('stream', ({ detail: stream }) => {
      let pend = null;
      stream.addEventListener('message', (e) => {
        let chunk = messageBytes(e.data);
        if (pend !== null) chunk = Buffer.concat([pend, chunk]);
        pend = null;
        let off = 0;
        for (; chunk.length - off >= TOKEN; off += TOKEN) tracker.add(chunk.readUInt32BE(off), 1, chunk, off);
        if (off < chunk.length) pend = chunk.subarray(off);
      });
    });
  });
  const ctrlSrv = net.createServer((s) => {
    s.setNoDelay(true);
    acks.attach(s);
  });
  await emit({ ready: true, dataPort: await listen(srv), ctrlPort: await listen(ctrlSrv) });
}

async function send(peer) {
  watchdog(timeoutMs, 'send');
  const ctrl = await connect(peer.ctrlPort);
  const muxers = [];
  for (let y = 0; y < peers; y++) muxers.push(yamuxOver(await connect(peer.dataPort), 'outbound'));
  const streams = [];
  for (let s = 0; s < slots; s++) streams.push(await muxers[s % peers].createStream());
  const sendPass = (pass, tS) => {
    for (let s = 0; s < slots; s++) {
      const tok = Buffer.allocUnsafe(TOKEN);
      fillToken(tok, 0, pass, s, tS);
      streams[s].send(tok);
    }
  };
  passDriver({ warm, passes, window, sendPass, ctrl, onDone: (r) => emitAndExit({ role: 'send', ...r }) }).start();
}

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
await pairMain(fileURLToPath(import.meta.url), args, common, {
  recv,
  send,
  extra: { bench: 'yamux', slots, peers, passes, warm, window },
});
