#!/usr/bin/env node
// The (d) limit: the least a batching protocol can cost in Node, written by hand. X slots, Y peers
// (one TCP connection per peer, slot s on peer s % Y); per pass and peer one batch = one
// socket.write: a 16-byte batch header (u8 0xB1, u8 version, u16 flags, u32 batch seq, u32 record
// count, u32 body length) and per token a 13-byte record header (u8 type, u32 slot, u32 seq,
// u32 length, big-endian) written with DataView into pooled buffers. The receiver parses batches
// across chunk boundaries and dispatches each payload view into a per-slot array, then drains it.
// Usage: node bench/limit-d.mjs [--slots 256] [--peers 1] [--window 8] [--passes 2000] [--warm 2000]
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

const args = parseArgs();
const slots = Number(args.slots ?? 256);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 2000);
const warm = Number(args.warm ?? 2000);
const window = Number(args.window ?? 8);
const timeoutMs = Number(args.timeout ?? 55_000);
const BATCH_HDR = 16;
const REC_HDR = 13;

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
  const perSlot = Array.from({ length: slots }, () => []);
  const onBatch = (buf, off) => {
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    if (dv.getUint8(off) !== 0xb1) throw new Error('bad batch type');
    const count = dv.getUint32(off + 8);
    const end = off + BATCH_HDR + dv.getUint32(off + 12);
    let o = off + BATCH_HDR;
    for (let i = 0; i < count; i++) {
      if (dv.getUint8(o) !== 2) throw new Error('bad record type');
      const slot = dv.getUint32(o + 1);
      const len = dv.getUint32(o + 9);
      perSlot[slot].push(buf.subarray(o + REC_HDR, o + REC_HDR + len));
      o += REC_HDR + len;
    }
    if (o !== end) throw new Error('batch length mismatch');
    // The consumer: drain each slot's queue, pass-count the tokens.
    let first = null;
    let n = 0;
    for (let s = 0; s < slots; s++) {
      const q = perSlot[s];
      if (q.length === 0) continue;
      for (const tok of q) {
        if (first === null) first = tok;
        n++;
      }
      q.length = 0;
    }
    tracker.add(first.readUInt32BE(0), n, first, 0);
  };
  const srv = net.createServer((sock) => {
    sock.setNoDelay(true);
    let pend = null;
    sock.on('data', (chunk) => {
      if (pend !== null) chunk = Buffer.concat([pend, chunk]);
      pend = null;
      let off = 0;
      while (chunk.length - off >= BATCH_HDR) {
        const len = BATCH_HDR + chunk.readUInt32BE(off + 12);
        if (chunk.length - off < len) break;
        onBatch(chunk, off);
        off += len;
      }
      if (off < chunk.length) pend = chunk.subarray(off);
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
  const groups = [];
  for (let y = 0; y < peers; y++) {
    const ids = [];
    for (let s = y; s < slots; s += peers) ids.push(s);
    const size = BATCH_HDR + ids.length * (REC_HDR + TOKEN);
    groups.push({
      sock: await connect(peer.dataPort),
      ids,
      toks: ids.map(() => Buffer.allocUnsafe(TOKEN)),
      seqs: new Uint32Array(ids.length),
      free: [],
      size,
      batchSeq: 0,
    });
  }
  const sendPass = (pass, tS) => {
    for (const g of groups) {
      for (let i = 0; i < g.ids.length; i++) fillToken(g.toks[i], 0, pass, g.ids[i], tS);
      let e = g.free.pop();
      if (e === undefined) {
        const buf = Buffer.allocUnsafeSlow(g.size);
        e = { buf, dv: new DataView(buf.buffer, buf.byteOffset, buf.byteLength) };
      }
      const { buf, dv } = e;
      let o = BATCH_HDR;
      for (let i = 0; i < g.ids.length; i++) {
        dv.setUint8(o, 2);
        dv.setUint32(o + 1, g.ids[i]);
        dv.setUint32(o + 5, g.seqs[i]++);
        dv.setUint32(o + 9, TOKEN);
        buf.set(g.toks[i], o + REC_HDR);
        o += REC_HDR + TOKEN;
      }
      dv.setUint8(0, 0xb1);
      dv.setUint8(1, 1);
      dv.setUint16(2, 0);
      dv.setUint32(4, g.batchSeq++);
      dv.setUint32(8, g.ids.length);
      dv.setUint32(12, o - BATCH_HDR);
      g.sock.write(buf, () => g.free.push(e));
    }
  };
  passDriver({
    warm,
    passes,
    window,
    sendPass,
    ctrl,
    onDone: (r) => emitAndExit({ role: 'send', ...r, send_writes_per_pass: peers }),
  }).start();
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
  extra: { bench: 'limit-d', slots, peers, passes, warm, window },
});
