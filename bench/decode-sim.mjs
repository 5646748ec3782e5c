// The decode-engine simulation behind `npm start` (playground/demo.mjs) and the bench's
// tokens-per-write scenario: one engine node holds up to `maxBatch` requests in decode and emits one
// token per request per forward pass every `passMs` ms (0: back to back, yielding between passes);
// the requests are spread over `frontends` consumer nodes that read every token. One call runs one
// mode — legacy per-stream TCP, mux Auto or mux Manual (one flushBatch() per pass) — in this process.
import { createNode } from '../dist/index.js';
import { tcpTransport } from '../dist/adapters/node-tcp.js';
import { tcpStreamTransport } from '../dist/adapters/node-tcp-stream.js';

const sleep = (ms) => new Promise((r) => (ms > 0 ? setTimeout(r, ms) : setImmediate(r)));

function muxConfig(cfg, mode) {
  if (mode === 'legacy') return { enabled: false };
  return {
    initialCredit: cfg.credit,
    flushPolicy: mode === 'manual' ? { kind: 'manual' } : { kind: 'auto', onAdmission: true },
  };
}

/**
 * Run one mode. `cfg`: { requests, frontends, passMs, tokens, maxBatch, credit, lanes, yieldSends };
 * `log(text)` receives the progress line (with `\r`), or null for none.
 */
export async function runDecodeSim(cfg, mode, log = null) {
  const mux = muxConfig(cfg, mode);
  const frontends = [];
  for (let i = 0; i < cfg.frontends; i++) {
    frontends.push(
      await createNode({
        transports: [tcpTransport({ port: 0 })],
        perStream: tcpStreamTransport(),
        lanes: cfg.lanes,
        mux,
      }),
    );
  }
  const engine = await createNode({
    transports: [tcpTransport({ listen: false })],
    perStream: tcpStreamTransport(),
    lanes: cfg.lanes,
    mux,
  });
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

  log?.(`  ${mode.padEnd(6)} running…\r`);
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
    if (log !== null && performance.now() - lastProgress > 200) {
      lastProgress = performance.now();
      log(
        `  ${mode.padEnd(6)} ${sent.toLocaleString()} tokens sent, ${received.toLocaleString()} received, ${active.length} requests in decode\r`,
      );
    }
    await sleep(cfg.passMs);
  }
  await Promise.all(consumers);
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const m = engine.metrics();
  const writes = mode === 'legacy' ? engine.perStreamWrites : m['velo_streaming_mux_batches_total{direction="sent"}'];
  const dataWrites =
    mode === 'legacy' ? writes : writes - m['velo_streaming_mux_records_sent_total{record_type="open_slot"}'];
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
    readerStall:
      fm.reduce((a, x) => a + x['velo_streaming_mux_reader_stall_total'], 0) +
      m['velo_streaming_mux_reader_stall_total'],
    creditLost:
      fm.reduce((a, x) => a + x['velo_streaming_mux_credit_lost_total'], 0) + m['velo_streaming_mux_credit_lost_total'],
  };
  await engine.close();
  for (const f of frontends) await f.close();
  const liveAfter = [engine, ...frontends].reduce((a, n) => a + n.metricsRegistry.liveSlots, 0);
  result.liveSlotsAfter = liveAfter;
  log?.(' '.repeat(90) + '\r');
  return result;
}
