#!/usr/bin/env node
// Baseline: node:http2, what a Node user would pick instead of a multiplexer. Y unencrypted HTTP/2
// sessions (h2c on 127.0.0.1; slot s on session s % Y), one response stream per slot, one
// `stream.write` per token. The engine is the HTTP/2 server (it pushes response bodies to
// frontends, which open one GET per slot); Node's C++ layer coalesces the frames it queued in one
// event-loop turn into few socket writes, so this baseline batches by itself.
//
//   --mode raw  each write is the 64-byte token (one DATA frame per token).
//   --mode sse  each write is one Server-Sent Event in AI SDK UI-stream framing:
//               `data: {"type":"text-delta","id":"s<slot>","delta":"<64 chars>"}\n\n`, built per
//               token with JSON.stringify as the SDK does; the receiver splits events, JSON.parses
//               each and reads pass and start stamp back from the delta text.
//
// Usage: node bench/h2-bench.mjs [--mode raw|sse] [--slots 256] [--peers 1] [--window 8]
//        [--passes 2000] [--warm 2000]
// Prints one JSON line, like the other pass benchmarks (harness.mjs).
import http2 from 'node:http2';
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
  tokenPass,
  watchdog,
} from './harness.mjs';

const args = parseArgs();
const mode = args.mode ?? 'raw';
const slots = Number(args.slots ?? 256);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 2000);
const warm = Number(args.warm ?? 2000);
const window = Number(args.window ?? 8);
const timeoutMs = Number(args.timeout ?? 55_000);
if (mode !== 'raw' && mode !== 'sse') throw new Error(`--mode raw|sse, got ${mode}`);
const sse = mode === 'sse';
// Node's defaults would stall the run, not measure it: a 64 KiB connection window is less than W
// passes of 1,024 streams, and the default session memory cap refuses streams under load.
const CONN_WINDOW = 32 << 20;
const SESSION_MEMORY_MB = 256;
const fail = (role, e) => emitAndExit({ role, error: `${role}: ${e?.stack ?? e}` }, 1);

// The SSE text of a token: pass and start stamp, padded with 'a' to the token's 64 characters.
const PAD = 'a'.repeat(TOKEN);
const deltaText = (pass, tS) => {
  const head = `${pass} ${tS} `;
  return head + PAD.slice(head.length);
};

async function send() {
  watchdog(timeoutMs, 'send');
  const server = http2.createServer({
    maxSessionMemory: SESSION_MEMORY_MB,
    settings: { maxConcurrentStreams: slots + 16 },
  });
  // Nagle off on both ends, as every other pass benchmark's sockets (the session's proxy forbids it later).
  server.on('connection', (sock) => sock.setNoDelay(true));
  server.on('sessionError', (e) => fail('send', e));
  const streams = new Array(slots);
  let opened = 0;
  let allOpen;
  const allOpenP = new Promise((res) => (allOpen = res));
  server.on('stream', (stream, headers) => {
    const slot = Number(String(headers[':path']).slice(3)); // '/s/<slot>'
    if (!(slot >= 0 && slot < slots) || streams[slot] !== undefined)
      return fail('send', `bad path ${headers[':path']}`);
    stream.on('error', (e) => fail('send', e));
    stream.respond({ ':status': 200, 'content-type': sse ? 'text/event-stream' : 'application/octet-stream' });
    streams[slot] = stream;
    if (++opened === slots) allOpen();
  });
  const ctrlSrv = net.createServer();
  const ctrlP = new Promise((res) => ctrlSrv.once('connection', (s) => (s.setNoDelay(true), res(s))));
  await emit({ ready: true, h2Port: await listen(server), ctrlPort: await listen(ctrlSrv) });
  const [ctrl] = await Promise.all([ctrlP, allOpenP]);

  let sendPass;
  if (sse) {
    const ids = Array.from({ length: slots }, (_, s) => `s${s}`);
    sendPass = (pass, tS) => {
      const delta = deltaText(pass, tS);
      for (let s = 0; s < slots; s++)
        streams[s].write(`data: ${JSON.stringify({ type: 'text-delta', id: ids[s], delta })}\n\n`);
    };
  } else {
    // A ring of W+1 pass buffers, as in mux-bench.mjs: pass p's buffer is reused at pass p+W+1,
    // when the window guarantees pass p was delivered and acked, so a queued write never sees it change.
    const ring = Array.from({ length: window + 1 }, () => {
      const buf = Buffer.allocUnsafeSlow(slots * TOKEN);
      return { buf, views: Array.from({ length: slots }, (_, s) => buf.subarray(s * TOKEN, (s + 1) * TOKEN)) };
    });
    sendPass = (pass, tS) => {
      const { buf, views } = ring[pass % ring.length];
      for (let s = 0; s < slots; s++) fillToken(buf, s * TOKEN, pass, s, tS);
      for (let s = 0; s < slots; s++) streams[s].write(views[s]);
    };
  }
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
  const sessions = [];
  for (let y = 0; y < peers; y++) {
    const session = http2.connect(`http://127.0.0.1:${peer.h2Port}`, {
      maxSessionMemory: SESSION_MEMORY_MB,
      peerMaxConcurrentStreams: slots + 16,
      createConnection: () => net.connect({ host: '127.0.0.1', port: peer.h2Port, noDelay: true }),
    });
    session.on('error', (e) => fail('recv', e));
    await new Promise((res) => session.once('connect', res));
    session.setLocalWindowSize(CONN_WINDOW);
    sessions.push(session);
  }
  // The start stamp of an SSE token, where the tracker reads it (tokenStart: f64 at offset 8).
  const stamp = Buffer.alloc(16);
  const responses = [];
  for (let s = 0; s < slots; s++) {
    const req = sessions[s % peers].request({ ':method': 'GET', ':path': `/s/${s}` }, { endStream: true });
    req.on('error', (e) => fail('recv', e));
    let expect = 0;
    if (sse) {
      const id = `s${s}`;
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (chunk) => {
        text += chunk;
        let from = 0;
        for (let end = text.indexOf('\n\n'); end !== -1; end = text.indexOf('\n\n', from)) {
          if (!text.startsWith('data: ', from)) throw new Error(`stream ${s}: not an SSE data event`);
          const ev = JSON.parse(text.slice(from + 6, end));
          from = end + 2;
          const d = ev.delta;
          if (ev.type !== 'text-delta' || ev.id !== id || d.length !== TOKEN)
            throw new Error(`stream ${s}: bad event ${JSON.stringify(ev)}`);
          const sp = d.indexOf(' ');
          const pass = Number(d.slice(0, sp));
          if (pass !== expect++) throw new Error(`stream ${s}: got pass ${pass}, expected ${expect - 1}`);
          stamp.writeDoubleBE(Number(d.slice(sp + 1, d.indexOf(' ', sp + 1))), 8);
          tracker.add(pass, 1, stamp, 0);
        }
        text = from === text.length ? '' : text.slice(from);
      });
    } else {
      // A DATA frame may reach the stream in pieces: keep a partial token until the rest arrives.
      let pend = null;
      req.on('data', (chunk) => {
        if (pend !== null) chunk = Buffer.concat([pend, chunk]);
        pend = null;
        let o = 0;
        for (; chunk.length - o >= TOKEN; o += TOKEN) {
          const pass = tokenPass(chunk, o);
          if (pass !== expect++ || chunk.readUInt32BE(o + 4) !== s)
            throw new Error(`stream ${s}: got pass ${pass}, expected ${expect - 1}`);
          tracker.add(pass, 1, chunk, o);
        }
        if (o < chunk.length) pend = chunk.subarray(o);
      });
    }
    responses.push(new Promise((res) => req.once('response', res)));
  }
  await Promise.all(responses);
  acks.attach(await connect(peer.ctrlPort));
}

const common = [
  '--mode',
  mode,
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
// pairMain starts the child it names 'recv' first and hands its ready line to the other. Here the
// frontends connect to the engine's server, so the sender listens: it takes the first child's place.
await pairMain(fileURLToPath(import.meta.url), args, common, {
  recv: send,
  send: recv,
  extra: { bench: `node-http2-${mode}`, mode, slots, peers, passes, warm, window },
});
