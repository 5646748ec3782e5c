#!/usr/bin/env node
// lanemux in the shape of the shared perf anchors (../shared/bench-anchors, tcp-baselines.mjs):
// X slots (streams) of 64-byte tokens, Y peers, one token per slot per pass; sender and receiver
// in separate processes on 127.0.0.1; the receiver acks each completed pass on a plain node:net
// control connection; window W passes in flight (8: throughput, 1: lockstep latency); warm-up
// passes, a barrier, then timed passes. CPU = user+sys of both processes over the timed section.
// The pass tracker, pass driver, ack writer, token format and orchestration are the anchors' own
// (lib.mjs), so only the data path differs:
//
//   receiver: Y consumer nodes (one TCP listener each = Y peers), X anchors (slot s on node s % Y),
//             each read with `for await (const tok of anchor)`; tokens feed lib's passTracker.
//   sender:   one engine node connected to the Y nodes, X senders (`attachAnchor`), per pass one
//             64-byte Uint8Array token per slot via `send` (or `trySend`), and under Manual one
//             `flushBatch()` per pass (Y batches, as anchor (d) with Y frontends writes Y batches).
//
// Usage (after `npm run build`):
//   node test/bench/mux-bench.mjs [--flush auto|manual] [--slots 256] [--peers 1] [--window 8]
//        [--passes 2000] [--warm 2000] [--credit 32] [--api send|try] [--lanes 1] [--timeout 55000]
// Prints one JSON line (lib.mjs's field names: tokens_per_s, total_cpu_us_per_token,
// pass_latency_p50_ms, ...) plus lanemux counters: tokens_per_batch (data records per batch
// written by the engine in the timed section), batches_per_pass, credit batches back per pass.
// BENCH_NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles both children.
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { lib, dist } from './anchors.mjs';

const {
  parseArgs, emit, emitAndExit, watchdog, fillToken, TOKEN, passTracker, passDriver, ackWriter, listen, connect,
  runPair, finalizePass, round,
} = lib;

const args = parseArgs();
const flush = args.flush ?? 'auto';
const slots = Number(args.slots ?? 256);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 2000);
const warm = Number(args.warm ?? 2000);
const window = Number(args.window ?? 8);
const credit = Number(args.credit ?? 32);
const api = args.api ?? 'send';
const lanes = Number(args.lanes ?? 1);
const timeoutMs = Number(args.timeout ?? 55000);
if (!['auto', 'manual'].includes(flush)) throw new Error(`--flush auto|manual, got ${flush}`);
if (!['send', 'try'].includes(api)) throw new Error(`--api send|try, got ${api}`);
if (!(slots >= 1 && peers >= 1 && peers <= slots && passes >= 2 && warm >= 1 && window >= 1)) throw new Error('bad --slots/--peers/--passes/--warm/--window');

const muxConfig = {
  initialCredit: credit,
  flushPolicy: flush === 'manual' ? { kind: 'manual' } : { kind: 'auto', onAdmission: true },
};

const M = 'velo_streaming_mux_';
const counters = (node) => {
  const m = node.metrics();
  return {
    batches: m[`${M}batches_total{direction="sent"}`],
    records: m[`${M}records_per_batch_sum{direction="sent"}`],
    data: m[`${M}records_sent_total{record_type="data"}`],
    credit: m[`${M}records_sent_total{record_type="credit_update"}`],
    received: m[`${M}batches_total{direction="received"}`],
    stalls: m[`${M}reader_stall_total`] + m[`${M}epoch_deaths_total`] + m[`${M}credit_lost_total`],
    exhausted: m['velo_streaming_slot_credit_exhausted_total'],
    backpressure: m['velo_streaming_producer_send_backpressure_total'],
  };
};
const sumCounters = (nodes) => {
  const out = {};
  for (const n of nodes) for (const [k, v] of Object.entries(counters(n))) out[k] = (out[k] ?? 0) + v;
  return out;
};
const diff = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, a[k] - b[k]]));

async function recv() {
  watchdog(timeoutMs, 'recv');
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('transport/node-tcp.js');
  const nodes = [];
  for (let y = 0; y < peers; y++) {
    nodes.push(await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })], lanes, mux: muxConfig }));
  }
  const anchors = [];
  for (let s = 0; s < slots; s++) anchors.push(nodes[s % peers].createAnchor());

  const ctrlSrv = net.createServer();
  let ctrlSock = null;
  let ack = null;
  let c0 = null;
  // The tracker reads the pass start stamp with buf.readDoubleBE(off + 8) once per pass; tokens
  // arrive as plain Uint8Arrays, so hand it this one reusable shim instead of wrapping each token.
  const shim = {
    u: null,
    readDoubleBE(off) {
      const u = this.u;
      return new DataView(u.buffer, u.byteOffset, u.byteLength).getFloat64(off);
    },
  };
  const tracker = passTracker({
    slots, warm, passes,
    onAck: (p) => {
      ack(p);
      if (p === warm - 1) c0 = sumCounters(nodes);
    },
    onDone: async (r) => {
      const d = diff(sumCounters(nodes), c0);
      await emit({
        ...r,
        recv_batches_received: d.received,
        recv_credit_batches_sent: d.batches,
        recv_credit_records_sent: d.credit,
        recv_faults: d.stalls,
      });
      // Leave when the sender has gone (it exits right after its last ack), or after 2 s.
      const bye = () => process.exit(0);
      setTimeout(bye, 2000).unref();
      if (ctrlSock === null || ctrlSock.destroyed) bye();
      else ctrlSock.once('close', bye);
    },
  });
  const fail = (e) => emitAndExit({ role: 'recv', error: `reader: ${e?.stack ?? e}` }, 1);
  // One reader per anchor, as an application would consume its streams.
  for (let s = 0; s < slots; s++) {
    const anchor = anchors[s];
    (async () => {
      let expect = 0;
      for await (const tok of anchor) {
        const pass = ((tok[0] << 24) | (tok[1] << 16) | (tok[2] << 8) | tok[3]) >>> 0;
        if (pass !== expect || tok.length !== TOKEN) throw new Error(`slot ${s}: got pass ${pass} (len ${tok.length}), expected ${expect}`);
        expect++;
        shim.u = tok;
        tracker.add(pass, 1, shim, 0);
      }
    })().catch(fail);
  }
  ctrlSrv.on('connection', (sock) => {
    sock.setNoDelay(true);
    ctrlSock = sock;
    ack = ackWriter(sock);
  });
  const ctrlPort = await listen(ctrlSrv);
  await emit({ ready: true, ctrlPort, addresses: nodes.map((n) => n.address), handles: anchors.map((a) => a.handle) });
}

async function send(peer) {
  watchdog(timeoutMs, 'send');
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('transport/node-tcp.js');
  const engine = await createNode({ transports: [tcpTransport({ listen: false })], lanes, mux: muxConfig });
  for (const a of peer.addresses) await engine.connect(a);
  const senders = [];
  for (let i = 0; i < peer.handles.length; i += 64) {
    senders.push(...(await Promise.all(peer.handles.slice(i, i + 64).map((h) => engine.attachAnchor(h)))));
  }
  const ctrl = await connect(peer.ctrlPort);

  // Token buffers: a ring of W+1 pass buffers with one 64-byte view per slot. A token may be held
  // by reference while withheld (no credit, or parked on admission) until it is written; pass p's
  // buffer is reused at pass p+W+1, when the window guarantees pass p was delivered and acked.
  const ringN = window + 1;
  const ring = Array.from({ length: ringN }, () => {
    const buf = Buffer.allocUnsafeSlow(slots * TOKEN);
    return { buf, views: Array.from({ length: slots }, (_, s) => buf.subarray(s * TOKEN, (s + 1) * TOKEN)) };
  });
  const manual = flush === 'manual';
  let c0 = null;
  let fallbacks = 0;
  const sendPass = (pass, tS) => {
    if (pass === warm) c0 = counters(engine);
    const { buf, views } = ring[pass % ringN];
    for (let s = 0; s < slots; s++) fillToken(buf, s * TOKEN, pass, s, tS);
    if (api === 'send') {
      // The shared resolved promise is not awaited: the window bounds what is in flight; a
      // rejection (closed stream) is unhandled and ends the child with an error.
      for (let s = 0; s < slots; s++) senders[s].send(views[s]);
    } else {
      for (let s = 0; s < slots; s++) {
        if (!senders[s].trySend(views[s])) {
          fallbacks++;
          senders[s].send(views[s]);
        }
      }
    }
    if (manual) engine.flushBatch();
  };
  // Manual has no timer for application records (spec §15.2 item 5): a credit grant that arrives
  // after a pass's flushBatch() releases the withheld records into the *next* pass's batch. A
  // decode engine keeps calling flushBatch(); this pass driver instead stops at W passes in flight
  // and would wait forever for a pass whose tokens sit staged. So under Manual a 1 ms idle check
  // calls flushBatch() when records are staged between passes (counted as rescue_flushes; they
  // happen only after credit starvation).
  let rescues = 0;
  let rescueTimer = null;
  if (manual) {
    const reg = engine.metricsRegistry;
    rescueTimer = setInterval(() => {
      if (reg.stagedRecords > 0) {
        rescues++;
        engine.flushBatch();
      }
    }, 1);
  }
  const drv = passDriver({
    warm, passes, window, sendPass, ctrl,
    onDone: (r) => {
      if (rescueTimer !== null) clearInterval(rescueTimer);
      const d = diff(counters(engine), c0);
      emitAndExit({
        ...r,
        send_batches: d.batches,
        send_data_records: d.data,
        tokens_per_batch: round(d.data / d.batches, 1),
        batches_per_pass: round(d.batches / passes, 3),
        send_credit_exhausted: d.exhausted,
        send_backpressure: d.backpressure,
        send_try_fallbacks: fallbacks,
        manual_rescue_flushes: rescues, // whole run, warm-up included
        send_faults: d.stalls,
      });
    },
  });
  drv.start();
}

if (args.role === 'recv') await recv();
else if (args.role === 'send') await send(JSON.parse(args.peer));
else {
  const script = fileURLToPath(import.meta.url);
  const common = ['--flush', flush, '--slots', String(slots), '--peers', String(peers), '--passes', String(passes), '--warm', String(warm),
    '--window', String(window), '--credit', String(credit), '--api', api, '--lanes', String(lanes), '--timeout', String(timeoutMs)];
  const r = await runPair(script, [...common, '--role', 'recv'], [...common, '--role', 'send'], timeoutMs + 5000);
  const out = finalizePass(r, slots, passes);
  // lib's error text repeats the child's argv, whose --peer JSON holds every handle: elide it.
  if (typeof out.error === 'string') out.error = out.error.replace(/--peer \{[\s\S]*?\} exited/, '--peer {…} exited');
  if (!out.error) {
    const np = passes;
    out.credit_batches_back_per_pass = round(out.recv_credit_batches_sent / np, 3);
  }
  await emitAndExit({ bench: `lanemux-${flush}`, flush, api, credit, lanes, slots, peers, passes, warm, window, ...out }, r.error ? 1 : 0);
}
