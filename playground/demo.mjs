#!/usr/bin/env node
// `npm start`: a decode-engine simulation on loopback TCP.
//
// One engine node holds up to --max-batch requests in decode and emits one token per request per
// forward pass, every --pass-ms ms. Requests are spread over --frontends frontend nodes, each of
// which consumes every token of its requests. The same workload runs once per mode — legacy
// per-stream TCP, mux Auto, mux Manual — and the demo ends with one table per mode.
import { parseArgs } from 'node:util';
import { createNode } from '../dist/index.js';
import { tcpTransport } from '../dist/transport/node-tcp.js';
import { tcpStreamTransport } from '../dist/transport/node-tcp-stream.js';

const { values: opt } = parseArgs({
  options: {
    requests: { type: 'string', default: '256' },
    frontends: { type: 'string', default: '4' },
    'pass-ms': { type: 'string', default: '2' },
    tokens: { type: 'string', default: '128' },
    'max-batch': { type: 'string' },
    credit: { type: 'string', default: '32' },
    lanes: { type: 'string', default: '1' },
    modes: { type: 'string', default: 'legacy,auto,manual' },
    json: { type: 'boolean', default: false },
    'yield-sends': { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (opt.help) {
  console.log(`usage: npm start -- [--requests 256] [--frontends 4] [--pass-ms 2] [--tokens 128]
                  [--max-batch N] [--credit 32] [--lanes 1] [--modes legacy,auto,manual] [--json]
  --pass-ms 0 runs passes back to back (yielding to the event loop between passes).
  --yield-sends yields to the event loop after every send (a producer whose sampling step does I/O):
  Auto then writes what it finds at each wake, Manual still writes one batch per peer per pass.`);
  process.exit(0);
}
const cfg = {
  requests: int(opt.requests, 1, 100_000, 'requests'),
  frontends: int(opt.frontends, 1, 64, 'frontends'),
  passMs: num(opt['pass-ms'], 0, 10_000, 'pass-ms'),
  tokens: int(opt.tokens, 1, 100_000, 'tokens'),
  credit: int(opt.credit, 1, 65_536, 'credit'),
  lanes: int(opt.lanes, 1, 16, 'lanes'),
  modes: opt.modes.split(',').map((m) => m.trim()).filter(Boolean),
  yieldSends: opt['yield-sends'],
};
cfg.maxBatch = opt['max-batch'] === undefined ? cfg.requests : int(opt['max-batch'], 1, 100_000, 'max-batch');
for (const m of cfg.modes) if (!['legacy', 'auto', 'manual'].includes(m)) fail(`unknown mode ${m}`);

function int(v, min, max, name) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer in ${min}..${max}`);
  return n;
}
function num(v, min, max, name) {
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) fail(`--${name} must be a number in ${min}..${max}`);
  return n;
}
function fail(msg) {
  console.error(`demo: ${msg}`);
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => (ms > 0 ? setTimeout(r, ms) : setImmediate(r)));

function muxConfig(mode) {
  if (mode === 'legacy') return { enabled: false };
  return { initialCredit: cfg.credit, flushPolicy: mode === 'manual' ? { kind: 'manual' } : { kind: 'auto', onAdmission: true } };
}

async function runMode(mode) {
  const mux = muxConfig(mode);
  const frontends = [];
  for (let i = 0; i < cfg.frontends; i++) {
    frontends.push(await createNode({ transports: [tcpTransport({ port: 0 })], perStream: tcpStreamTransport(), lanes: cfg.lanes, mux }));
  }
  const engine = await createNode({ transports: [tcpTransport({ listen: false })], perStream: tcpStreamTransport(), lanes: cfg.lanes, mux });
  for (const f of frontends) await engine.connect(f.address);

  const latencies = new Float64Array(cfg.requests * cfg.tokens);
  let received = 0;
  let sent = 0;
  const consumers = [];
  const pending = [];
  for (let r = 0; r < cfg.requests; r++) {
    const fe = frontends[r % cfg.frontends];
    const anchor = fe.createAnchor();
    pending.push(anchor.handle);
    consumers.push(
      (async () => {
        let n = 0;
        for await (const tok of anchor) {
          // A token carries its send time: "<ms>|<text>".
          latencies[received++] = performance.now() - Number(tok.slice(0, tok.indexOf('|')));
          n++;
        }
        if (n !== cfg.tokens) throw new Error(`request ${r} got ${n} of ${cfg.tokens} tokens`);
      })(),
    );
  }

  if (!cfg.quiet && !opt.json) process.stdout.write(`  ${mode.padEnd(6)} running…\r`);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const active = [];
  let next = 0;
  let lastProgress = t0;
  const words = [' the', ' quick', ' brown', ' fox', ' jumps', ' over', ' a', ' lazy', ' dog', '.'];
  while (next < pending.length || active.length > 0) {
    // Admit new requests into the decode batch (attach = the request reaching the engine).
    const admit = [];
    while (active.length + admit.length < cfg.maxBatch && next < pending.length) admit.push(pending[next++]);
    if (admit.length > 0) {
      const senders = await Promise.all(admit.map((h) => engine.attachAnchor(h)));
      for (const s of senders) active.push({ s, left: cfg.tokens });
    }
    // One forward pass: one token per active request.
    const now = performance.now();
    const waits = [];
    for (const req of active) {
      const p = req.s.send(`${now.toFixed(3)}|${words[req.left % words.length]}`);
      if (p !== undefined) waits.push(p);
      sent++;
      if (--req.left === 0) waits.push(req.s.finalize());
      if (cfg.yieldSends) await new Promise((r) => setImmediate(r));
    }
    if (mode === 'manual') engine.flushBatch();
    await Promise.all(waits);
    for (let i = active.length - 1; i >= 0; i--) if (active[i].left === 0) active.splice(i, 1);
    if (!cfg.quiet && !opt.json && performance.now() - lastProgress > 200) {
      lastProgress = performance.now();
      process.stdout.write(`  ${mode.padEnd(6)} ${sent.toLocaleString()} tokens sent, ${received.toLocaleString()} received, ${active.length} requests in decode\r`);
    }
    await sleep(cfg.passMs);
  }
  await Promise.all(consumers);
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const m = engine.metrics();
  const writes = mode === 'legacy' ? engine.perStreamWrites : m['velo_streaming_mux_batches_total{direction="sent"}'];
  const dataWrites = mode === 'legacy' ? writes : writes - m['velo_streaming_mux_records_sent_total{record_type="open_slot"}'];
  const sorted = latencies.slice(0, received).sort();
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  const fm = frontends.map((f) => f.metrics());
  const result = {
    mode,
    tokens: received,
    writes: dataWrites,
    openWrites: writes - dataWrites,
    tokensPerWrite: received / dataWrites,
    p50: pct(50),
    p99: pct(99),
    cpuUsPerToken: (cpu.user + cpu.system) / received,
    seconds: elapsed / 1000,
    readerStall: fm.reduce((a, x) => a + x['velo_streaming_mux_reader_stall_total'], 0) + m['velo_streaming_mux_reader_stall_total'],
    creditLost: fm.reduce((a, x) => a + x['velo_streaming_mux_credit_lost_total'], 0) + m['velo_streaming_mux_credit_lost_total'],
  };
  await engine.close();
  for (const f of frontends) await f.close();
  const liveAfter = [engine, ...frontends].reduce((a, n) => a + n.metricsRegistry.liveSlots, 0);
  result.liveSlotsAfter = liveAfter;
  if (!cfg.quiet && !opt.json) process.stdout.write(' '.repeat(90) + '\r');
  return result;
}

const results = [];
if (!opt.json) {
  console.log(`lanemux demo: ${cfg.requests} requests x ${cfg.tokens} tokens, ${cfg.frontends} frontends, max batch ${cfg.maxBatch}, ` +
    `pass every ${cfg.passMs} ms, credit ${cfg.credit}, ${cfg.lanes} lane(s)${cfg.yieldSends ? ', yielding after every send' : ''}, loopback TCP`);
}
for (const mode of cfg.modes) results.push(await runMode(mode));

if (opt.json) {
  console.log(JSON.stringify({ config: cfg, results }, null, 2));
} else {
  const label = { legacy: 'legacy per-stream', auto: 'mux Auto', manual: 'mux Manual' };
  const rows = results.map((r) => [
    label[r.mode],
    r.tokens.toLocaleString(),
    r.writes.toLocaleString(),
    r.openWrites.toLocaleString(),
    r.tokensPerWrite.toFixed(2),
    `${r.p50.toFixed(2)} / ${r.p99.toFixed(2)}`,
    r.cpuUsPerToken.toFixed(2),
    r.seconds.toFixed(2),
  ]);
  const head = ['mode', 'tokens', 'data writes', 'open writes', 'tokens/write', 'latency p50 / p99 ms', 'CPU µs/token', 'wall s'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => '| ' + cells.map((c, i) => c.padEnd(widths[i])).join(' | ') + ' |';
  console.log('\n' + line(head));
  console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  for (const r of rows) console.log(line(r));
  const bad = results.filter((r) => r.readerStall !== 0 || r.creditLost !== 0 || r.liveSlotsAfter !== 0);
  console.log(bad.length === 0 ? '\ninvariants: reader_stall_total = 0, credit_lost_total = 0, live_slots back to 0 in every mode' : `\nINVARIANT BROKEN: ${JSON.stringify(bad)}`);
  console.log('CPU is user+system of this one process (engine and frontends share it); data writes are the engine\'s writes that carried tokens (mux batches, or one write per frame on the per-stream path, terminals included); open writes are the mux\'s OpenSlot batches (one per stream, written at attach).');
}
