#!/usr/bin/env node
// lanemux in the decode shape: X streams of 64-byte tokens, Y peers, one token per stream per pass,
// W passes in flight; sender and receiver in separate processes on 127.0.0.1 (harness.mjs).
//
//   receiver: Y consumer nodes (one TCP listener each = Y peers), X anchors (stream s on node s % Y),
//             each read with `for await (const tok of anchor)`.
//   sender:   one engine node connected to the Y nodes, X senders (`attachAnchor`), per pass one
//             64-byte Uint8Array per stream via `send()`; under Manual one `flushBatch()` per pass.
//   --impl per-stream: the same code with `mux: { enabled: false }` and `tcpStreamTransport()`, so
//             `attachAnchor` negotiates lanemux's legacy path (one TCP connection per stream).
//
// Usage (after `npm run build`):
//   node bench/mux-bench.mjs [--impl auto|manual|per-stream] [--slots 256] [--peers 1] [--window 8]
//        [--passes 2000] [--warm 2000] [--credit 32] [--lanes 1] [--read iter|take|push] [--item bytes|string]
//        [--resume on|off] [--auto-credit on|off] [--reply-linger MS] [--max-batch BYTES]
// --item string: each token is a 64-character ASCII string (an LLM's text) instead of 64 bytes.
// --read take: the consumer uses takeAvailable()/waitAvailable() instead of `for await`;
// --read push: anchor.consume({ item }) (push mode: no promise per token).
// Prints one JSON line; lanemux rows add tokens_per_write (data records per batch the engine wrote
// in the timed section) and writes_per_pass.
// BENCH_NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles both children.
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  TOKEN,
  pendingAcks,
  connect,
  dist,
  emit,
  emitAndExit,
  fillToken,
  listen,
  pairMain,
  parseArgs,
  passDriver,
  passTracker,
  round,
  stringToken,
  stringTokenPass,
  stringTokenStart,
  tokenPass,
  tokenStart,
  watchdog,
} from './harness.mjs';

const args = parseArgs();
const impl = args.impl ?? 'auto';
const slots = Number(args.slots ?? 256);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 2000);
const warm = Number(args.warm ?? 2000);
const window = Number(args.window ?? 8);
const credit = Number(args.credit ?? 32);
const lanes = Number(args.lanes ?? 1);
const read = args.read ?? 'iter';
const item = args.item ?? 'bytes';
if (!['bytes', 'string'].includes(item)) throw new Error(`--item bytes|string, got ${item}`);
const strings = item === 'string';
const timeoutMs = Number(args.timeout ?? 55_000);
// `--resume off` measures the nodes without stream resume (its steady-state cost, paired with bench/ab.mjs).
const resume = (args.resume ?? 'on') !== 'off';
// `--auto-credit on|off` sets `mux.autoCredit` (absent: the node's default), for a paired A/B of its cost.
const autoCredit = args['auto-credit'] === undefined ? undefined : args['auto-credit'] !== 'off';
// `--reply-linger MS` sets `mux.replyLinger` (absent: the node's default, 1 ms), to measure what the grants' linger costs.
const replyLinger = args['reply-linger'] === undefined ? undefined : Number(args['reply-linger']);
// `--max-batch BYTES` sets `mux.maxBatchBytes` (absent: the node's default), to measure what the batch cap costs.
const maxBatch = args['max-batch'] === undefined ? undefined : Number(args['max-batch']);
if (!['iter', 'take', 'push'].includes(read)) throw new Error(`--read iter|take|push, got ${read}`);
if (!['auto', 'manual', 'per-stream'].includes(impl)) throw new Error(`--impl auto|manual|per-stream, got ${impl}`);
const perStream = impl === 'per-stream';

const mux = perStream
  ? { enabled: false }
  : {
      initialCredit: credit,
      flushPolicy: impl === 'manual' ? { kind: 'manual' } : { kind: 'auto', onAdmission: true },
      ...(autoCredit === undefined ? {} : { autoCredit }),
      ...(replyLinger === undefined ? {} : { replyLinger }),
      ...(maxBatch === undefined ? {} : { maxBatchBytes: maxBatch }),
    };

async function makeNode(listenOn) {
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  const { tcpStreamTransport } = await dist('adapters/node-tcp-stream.js');
  const tcp = listenOn ? tcpTransport({ host: '127.0.0.1', port: 0 }) : tcpTransport({ listen: false });
  return createNode({
    transports: [tcp],
    lanes,
    mux,
    ...(resume ? {} : { resume: false }),
    ...(perStream ? { perStream: tcpStreamTransport({ host: '127.0.0.1' }) } : {}),
  });
}

const M = 'velo_streaming_mux_';
const sent = (node) => {
  const m = node.metrics();
  return {
    batches: m[`${M}batches_total{direction="sent"}`],
    data: m[`${M}records_sent_total{record_type="data"}`],
    // A slot that ran out of credit with a record to send (it then waits for a grant).
    exhausted: m['velo_streaming_slot_credit_exhausted_total'] ?? 0,
  };
};

async function recv() {
  watchdog(timeoutMs, 'recv');
  const nodes = [];
  for (let y = 0; y < peers; y++) nodes.push(await makeNode(true));
  const anchors = Array.from({ length: slots }, (_, s) => nodes[s % peers].createAnchor());
  const acks = pendingAcks();
  const tracker = passTracker({
    slots,
    warm,
    passes,
    startOf: strings ? stringTokenStart : tokenStart,
    onAck: acks.ack,
    // Batches the receiver wrote (credit grants, mostly), per pass over the whole run (warm-up included).
    onDone: (r) =>
      emitAndExit({
        role: 'recv',
        ...r,
        recv_batches_per_pass: round(nodes.reduce((n, node) => n + (sent(node).batches ?? 0), 0) / (warm + passes), 3),
      }),
  });
  const fail = (e) => emitAndExit({ role: 'recv', error: `reader: ${e?.stack ?? e}` }, 1);
  for (let s = 0; s < slots; s++) {
    (async () => {
      let expect = 0;
      const check = (tok) => {
        const pass = strings ? stringTokenPass(tok) : tokenPass(tok);
        if (pass !== expect++ || tok.length !== TOKEN)
          throw new Error(`stream ${s}: got pass ${pass} (${tok.length} B), expected ${expect - 1}`);
        tracker.add(pass, 1, tok, 0);
      };
      if (read === 'iter') {
        for await (const tok of anchors[s]) check(tok);
        return;
      }
      if (read === 'push') {
        await new Promise((resolve, reject) =>
          anchors[s].consume({ item: check, end: (e) => (e ? reject(e) : resolve()) }),
        );
        return;
      }
      // --read take: the promise-free reader (takeAvailable / waitAvailable).
      const out = [];
      while (!anchors[s].finished) {
        await anchors[s].waitAvailable();
        anchors[s].takeAvailable(out);
        for (const tok of out) check(tok);
        out.length = 0;
      }
    })().catch(fail);
  }
  const ctrlSrv = net.createServer((sock) => {
    sock.setNoDelay(true);
    acks.attach(sock);
  });
  await emit({
    ready: true,
    ctrlPort: await listen(ctrlSrv),
    addresses: nodes.map((n) => n.address),
    handles: anchors.map((a) => a.handle),
  });
}

async function send(peer) {
  watchdog(timeoutMs, 'send');
  const engine = await makeNode(false);
  for (const a of peer.addresses) await engine.connect(a);
  const senders = [];
  for (let i = 0; i < peer.handles.length; i += 64)
    senders.push(...(await Promise.all(peer.handles.slice(i, i + 64).map((h) => engine.attachAnchor(h)))));
  const ctrl = await connect(peer.ctrlPort);
  // A ring of W+1 pass buffers: a token may be held by reference until it is written, and pass p's
  // buffer is reused at pass p+W+1, when the window guarantees pass p was delivered and acked.
  const ring = Array.from({ length: window + 1 }, () => {
    const buf = Buffer.allocUnsafeSlow(slots * TOKEN);
    return { buf, views: Array.from({ length: slots }, (_, s) => buf.subarray(s * TOKEN, (s + 1) * TOKEN)) };
  });
  const manual = impl === 'manual';
  let c0 = null;
  let w0 = 0;
  const sendPass = (pass, tS) => {
    if (pass === warm) {
      c0 = sent(engine);
      w0 = engine.perStreamWrites;
    }
    if (strings) {
      const tok = stringToken(pass, tS);
      for (let s = 0; s < slots; s++) senders[s].send(tok);
    } else {
      const { buf, views } = ring[pass % ring.length];
      for (let s = 0; s < slots; s++) fillToken(buf, s * TOKEN, pass, s, tS);
      // The shared resolved promise is not awaited: the window bounds what is in flight.
      for (let s = 0; s < slots; s++) senders[s].send(views[s]);
    }
    if (manual) engine.flushBatch();
  };
  // Manual has no timer for application records: a credit grant that lands after a pass's
  // flushBatch() releases withheld records only at the next flushBatch(), but this driver stops at
  // W passes in flight. A 1 ms idle check flushes what is staged between passes (counted).
  let rescues = 0;
  const rescue = manual
    ? setInterval(() => {
        if (engine.metricsRegistry.stagedRecords > 0) {
          rescues++;
          engine.flushBatch();
        }
      }, 1)
    : null;
  passDriver({
    warm,
    passes,
    window,
    sendPass,
    ctrl,
    onDone: (r) => {
      if (rescue !== null) clearInterval(rescue);
      const c = sent(engine);
      const batches = perStream ? engine.perStreamWrites - w0 : c.batches - c0.batches;
      const data = perStream ? slots * passes : c.data - c0.data;
      emitAndExit({
        role: 'send',
        ...r,
        tokens_per_write: round(data / batches, 2),
        writes_per_pass: round(batches / passes, 3),
        credit_waits_per_1k_tokens: perStream ? 0 : round(((c.exhausted - c0.exhausted) / data) * 1000, 3),
        manual_rescue_flushes: rescues,
      });
    },
  }).start();
}

const common = [
  '--impl',
  impl,
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
  '--credit',
  String(credit),
  '--lanes',
  String(lanes),
  '--read',
  read,
  '--item',
  item,
  // The children build the nodes: every node option the parent was given goes to them.
  ...(resume ? [] : ['--resume', 'off']),
  ...(autoCredit === undefined ? [] : ['--auto-credit', autoCredit ? 'on' : 'off']),
  ...(replyLinger === undefined ? [] : ['--reply-linger', String(replyLinger)]),
  ...(maxBatch === undefined ? [] : ['--max-batch', String(maxBatch)]),
];
await pairMain(fileURLToPath(import.meta.url), args, common, {
  recv,
  send,
  extra: { bench: `lanemux-${impl}`, impl, read, item, credit, lanes, slots, peers, passes, warm, window },
});
