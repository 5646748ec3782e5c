#!/usr/bin/env node
// `npm run bench`: every scenario with its baselines measured in the same run.
//
//  1. decode shape   X streams × 64-byte tokens, Y peers, one token per stream per pass, window W:
//                    lanemux Manual, lanemux Auto, lanemux's per-stream path, yamux, ws one send per
//                    token, node:http2 one write per token (raw, and SSE in AI SDK framing) and the
//                    hand-written (d) limit, interleaved per shape in every round; table 1b sets lanemux beside HTTP/2.
//  2. tokens/write   the reference's three decode shapes, legacy vs Auto vs Manual, 5 runs.
//  3. lifecycle      open + 4 items + close, 64 in flight: attach, zero-RTT, per-stream, yamux; and
//                    open + close alone (0 items) for attach and zero-RTT.
//  4. memory         1,024 streams with a stalled consumer; 100,000 streams opened and closed.
//  5. latency        one stream, one token every 10 ms: raw socket, Auto, Auto+linger (±onComplete), Manual.
//  6. lanes          64 streams of 16 KiB items, 1 / 2 / 4 / 8 lanes, over TCP and over WebTransport Deno → Deno.
//  7. scale          the decode shape (W = 8) at X = 256 … 16,384 streams (1 peer) and Y = 1 … 64 peers
//                    (1,024 streams in all): lanemux Auto (push read), (d), node:http2, interleaved;
//                    drawn as an SVG chart beside the JSON (scale.svg; --quick: scale-quick.svg).
//
// Every benchmark is a child process (the decode-shape and latency ones run sender and receiver in
// two processes on 127.0.0.1). Figures are medians over rounds with [min–max]; every ratio is
// paired per round (lanemux ÷ baseline from the same round), then the median is taken.
//
// Usage (after `npm run build`; `npm run bench` builds first):
//   node bench/run.mjs [--quick] [--rounds 3] [--json out.json] [--only 1,3]
// The JSON goes to bench/results/latest.json (--quick: quick.json) unless --json says otherwise.
// --quick: tiny sizes, 1 round, < 1 minute (a smoke check; its numbers mean little).
// Exit status: 0 unless a benchmark child failed (twice); slow numbers never fail it.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { distDir, median, parseArgs, repoRoot } from './harness.mjs';
import { svgChart } from './svg-chart.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs();
if (args.help === 'true') {
  const src = fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n');
  process.stdout.write(
    src
      .slice(1, 26)
      .map((l) => l.replace(/^\/\/ ?/, ''))
      .join('\n') + '\n',
  );
  process.exit(0);
}
const quick = args.quick === 'true';
const rounds = Number(args.rounds ?? (quick ? 1 : 3));
const only = args.only ? new Set(String(args.only).split(',')) : null;
const want = (n) => only === null || only.has(String(n));
const jsonPath = path.resolve(
  args.json && args.json !== 'true' ? args.json : path.join(here, 'results', quick ? 'quick.json' : 'latest.json'),
);
if (!fs.existsSync(path.join(distDir, 'index.js'))) {
  console.error(`bench: ${distDir}/index.js is missing: run \`npm run build\` first (npm run bench does)`);
  process.exit(2);
}
const S = (f) => path.join(here, f);
const log = (s) => process.stderr.write(s + '\n');

function runChild(script, a, { timeoutMs = 120_000, nodeFlags = [] } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const k = spawn(process.execPath, [...nodeFlags, script, ...a], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    k.stdout.on('data', (d) => (out += d));
    k.stderr.on('data', (d) => (err = (err + d).slice(-3000)));
    const timer = setTimeout(() => k.kill('SIGKILL'), timeoutMs); // by PID: our own child only
    k.on('exit', (code, sig) => {
      clearTimeout(timer);
      let res;
      try {
        res = JSON.parse(out.trim().split('\n').filter(Boolean).pop());
      } catch {
        res = { error: `no JSON result (exit ${code} ${sig}): ${err.slice(-1500)}` };
      }
      if (code !== 0 && !res.error) res.error = `exit ${code} ${sig}: ${err.slice(-1500)}`;
      res._elapsed_s = (Date.now() - t0) / 1000;
      resolve(res);
    });
  });
}
let failures = 0;
async function run(label, script, a, opts) {
  let r = await runChild(script, a, opts);
  if (r.error) {
    log(`  ${label}: ERROR ${String(r.error).slice(0, 300)} — retrying once`);
    r = await runChild(script, a, opts);
  }
  if (r.error) failures++;
  return r;
}

// ───────────────────────── scenario definitions ─────────────────────────
const IMPLS = [
  // lanemux consumers read in push mode (`anchor.consume`), as (d) dispatches per slot without a
  // promise; "Auto, for await" shows what the async iterator costs on top.
  {
    id: 'manual',
    name: 'lanemux Manual',
    script: 'mux-bench.mjs',
    a: ['--impl', 'manual', '--read', 'push'],
    fast: true,
    mux: true,
  },
  {
    id: 'auto',
    name: 'lanemux Auto',
    script: 'mux-bench.mjs',
    a: ['--impl', 'auto', '--read', 'push'],
    fast: true,
    mux: true,
  },
  {
    id: 'auto-iter',
    name: 'lanemux Auto, for await',
    script: 'mux-bench.mjs',
    a: ['--impl', 'auto', '--read', 'iter'],
    fast: true,
    mux: true,
  },
  { id: 'd', name: '(d) hand-written limit', script: 'limit-d.mjs', a: [], fast: true },
  {
    id: 'per-stream',
    name: 'per-stream path',
    script: 'mux-bench.mjs',
    a: ['--impl', 'per-stream', '--read', 'push'],
    fast: false,
  },
  { id: 'yamux', name: 'yamux 8.0.1', script: 'yamux-bench.mjs', a: [], fast: false },
  { id: 'ws', name: 'ws, one send per token', script: 'ws-token.mjs', a: [], fast: false },
  // node:http2 coalesces a turn's frames into few socket writes, so it runs at the fast sizes.
  { id: 'h2', name: 'node:http2, one write per token', script: 'h2-bench.mjs', a: ['--mode', 'raw'], fast: true },
  { id: 'h2-sse', name: 'SSE over HTTP/2 (AI SDK)', script: 'h2-bench.mjs', a: ['--mode', 'sse'], fast: true },
];
const SHAPES = quick
  ? [
      { x: 256, y: 1, w: 8 },
      { x: 1024, y: 16, w: 1 },
    ]
  : [256, 1024].flatMap((x) => [1, 16].flatMap((y) => [8, 1].map((w) => ({ x, y, w }))));
// Timed + warm-up passes per cell: sized so every cell takes about a second.
function passesFor(impl, x) {
  // HTTP/2 costs several times (d) per token: its --quick cells run fewer passes so the smoke run stays short.
  if (quick && impl.id.startsWith('h2')) return [x > 256 ? 20 : 60, 20];
  if (quick) return impl.fast ? [x > 256 ? 40 : 150, 50] : [x > 256 ? 10 : 20, 10];
  if (impl.fast) return x > 256 ? [500, 300] : [2000, 1000];
  return x > 256 ? [80, 30] : [300, 100];
}
const shapeKey = (s) => `X=${s.x} Y=${s.y} W=${s.w}`;
// Scenario 7: X streams on 1 peer, then the same total X split over Y peers (X = 1,024 in all: the
// per-peer load shrinks as Y grows, as in scenario 1). The point (X = 1,024, Y = 1) serves both series.
const SCALE_IMPLS = ['auto', 'd', 'h2'].map((id) => IMPLS.find((i) => i.id === id));
const SCALE_X = quick ? [64, 256] : [256, 1024, 4096, 16384];
const SCALE_Y = quick ? [1, 4] : [1, 4, 16, 64];
const SCALE_YX = quick ? 256 : 1024;
const SCALE_W = 8;
const SCALE_POINTS = [
  ...SCALE_X.map((x) => ({ x, y: 1 })),
  ...SCALE_Y.filter((y) => !(y === 1 && SCALE_X.includes(SCALE_YX))).map((y) => ({ x: SCALE_YX, y })),
];
// About 600,000 timed tokens per cell (about a second for (d)), at least 30 passes.
const scalePasses = (x) => {
  const p = quick ? 20 : Math.max(30, Math.min(2000, Math.round(600_000 / x)));
  return [p, Math.max(10, p >> 1)];
};
const svgPath = path.join(path.dirname(jsonPath), quick ? 'scale-quick.svg' : 'scale.svg');

const raw = {
  scale: {},
  decode: {},
  tpw: [],
  lifecycle: {},
  memory: {},
  churn: [],
  latency: {},
  lanes: {},
  lanesWt: {},
};
// Scenario 4 runs the decode shape's 64-byte tokens and 1 KiB items (where the credit bound X · C · item exceeds the budget).
// 1,024 unread streams at these record sizes: the receiver's growth against peerByteBudget (the receive window).
const MEM_ITEMS = [64, 1024, 4096, 61440];
const LIFE = ['attach', 'zero-rtt', 'per-stream', 'yamux', 'attach-0', 'zero-rtt-0'];
/** A lifecycle row id → lifecycle.mjs arguments (`-0`: open + close alone, no items). */
const lifeArgs = (id) => (id.endsWith('-0') ? ['--mode', id.slice(0, -2), '--items', '0'] : ['--mode', id]);
const LAT = ['raw', 'auto', 'linger', 'linger-complete', 'manual'];
const LANES = [1, 2, 4, 8];
const lifeN = quick ? ['400', '100'] : ['10000', '2000'];
const tStart = Date.now();
const info = machine();

// ───────────────────────── rounds (interleaved) ─────────────────────────
for (let r = 0; r < rounds; r++) {
  log(`round ${r + 1}/${rounds}`);
  if (want(1)) {
    for (const shape of SHAPES) {
      // Rotate the order every round so no implementation always runs first.
      const order = IMPLS.map((_, i) => IMPLS[(i + r) % IMPLS.length]);
      for (const impl of order) {
        const [passes, warm] = passesFor(impl, shape.x);
        const a = [
          ...impl.a,
          '--slots',
          String(shape.x),
          '--peers',
          String(shape.y),
          '--window',
          String(shape.w),
          '--passes',
          String(passes),
          '--warm',
          String(warm),
        ];
        const res = await run(`${impl.name} ${shapeKey(shape)}`, S(impl.script), a);
        ((raw.decode[shapeKey(shape)] ??= {})[impl.id] ??= []).push(res);
        log(
          `  1 ${shapeKey(shape).padEnd(18)} ${impl.name.padEnd(32)} ${res.error ? 'ERROR' : `${Math.round(res.tokens_per_s).toLocaleString('en-US')} tok/s, ${res.total_cpu_us_per_token} µs/tok, p50 ${res.pass_latency_p50_ms} ms`} (${res._elapsed_s}s)`,
        );
      }
    }
  }
  if (want(7)) {
    for (const pt of SCALE_POINTS) {
      const order = SCALE_IMPLS.map((_, i) => SCALE_IMPLS[(i + r) % SCALE_IMPLS.length]);
      for (const impl of order) {
        const [passes, warm] = scalePasses(pt.x);
        const key = `X=${pt.x} Y=${pt.y}`;
        const a = [
          ...impl.a,
          ...['--slots', pt.x, '--peers', pt.y, '--window', SCALE_W, '--passes', passes, '--warm', warm].map(String),
        ];
        const res = await run(`scale ${impl.name} ${key}`, S(impl.script), a);
        ((raw.scale[key] ??= {})[impl.id] ??= []).push(res);
        log(
          `  7 ${key.padEnd(14)} ${impl.name.padEnd(32)} ${res.error ? 'ERROR' : `${Math.round(res.tokens_per_s).toLocaleString('en-US')} tok/s, ${res.total_cpu_us_per_token} µs/tok, p50 ${res.pass_latency_p50_ms} ms`} (${res._elapsed_s}s)`,
        );
      }
    }
  }
  if (want(3)) {
    for (const mode of LIFE) {
      const res = await run(`lifecycle ${mode}`, S('lifecycle.mjs'), [
        ...lifeArgs(mode),
        '--n',
        lifeN[0],
        '--warm',
        lifeN[1],
      ]);
      (raw.lifecycle[mode] ??= []).push(res);
      log(
        `  3 lifecycle ${mode.padEnd(10)} ${res.error ? 'ERROR' : `${res.streams_per_s} streams/s, ${res.cpu_us_per_stream} µs/stream`}`,
      );
    }
  }
  if (want(5)) {
    for (const mode of LAT) {
      const res = await run(`latency ${mode}`, S('latency.mjs'), [
        '--mode',
        mode,
        '--tokens',
        quick ? '20' : '300',
        '--warm',
        quick ? '5' : '20',
      ]);
      (raw.latency[mode] ??= []).push(res);
      log(
        `  5 latency ${mode.padEnd(16)} ${res.error ? 'ERROR' : `p50 ${res.latency_p50_ms} p99 ${res.latency_p99_ms} ms`}`,
      );
    }
  }
  if (want(6)) {
    for (const lanes of LANES) {
      const res = await run(`lanes ${lanes}`, S('lanes.mjs'), [
        '--lanes',
        String(lanes),
        '--items',
        quick ? '20' : '200',
      ]);
      (raw.lanes[lanes] ??= []).push(res);
      log(`  6 lanes ${lanes} ${res.error ? 'ERROR' : `${res.mb_per_s} MB/s, ${res.cpu_us_per_item} µs/item`}`);
      const wt = await run(`lanes-wt ${lanes}`, S('lanes-wt.mjs'), [
        '--lanes',
        String(lanes),
        '--items',
        quick ? '20' : '100',
      ]);
      (raw.lanesWt[lanes] ??= []).push(wt);
      log(
        `  6 lanes ${lanes} WebTransport ${wt.error ? 'ERROR' : `${wt.mb_per_s} MB/s, ${wt.cpu_us_per_item} µs/item`}`,
      );
    }
  }
  if (want(4)) {
    for (const item of MEM_ITEMS) {
      const res = await run('memory', S('memory.mjs'), ['--slots', quick ? '128' : '1024', '--item', String(item)]);
      (raw.memory[item] ??= []).push(res);
      log(
        `  4 memory ${item} B ${res.error ? 'ERROR' : `recv +${mb(res.recv_rss_growth_bytes)} MB RSS, send +${mb(res.send_rss_growth_bytes)} MB RSS`}`,
      );
    }
  }
}
if (want(2)) {
  for (let i = 0; i < (quick ? 1 : 5); i++) {
    const res = await run('tokens/write', S('tokens-per-write.mjs'), []);
    raw.tpw.push(res);
    log(`  2 tokens/write run ${i + 1} ${res.error ? 'ERROR' : 'ok'}`);
  }
}
if (want(4)) {
  const n = quick ? '2000' : '100000';
  const res = await run('churn', S('lifecycle.mjs'), ['--mode', 'attach', '--n', n, '--warm', quick ? '200' : '5000'], {
    nodeFlags: ['--expose-gc'],
    timeoutMs: 300_000,
  });
  raw.churn.push(res);
  log(
    `  4 churn ${res.error ? 'ERROR' : `heap +${mb(res.heap_growth_bytes)} MB after ${n} streams, live ${res.live_after}`}`,
  );
}
const totalS = (Date.now() - tStart) / 1000;

// ───────────────────────── aggregate & print ─────────────────────────
function mb(b) {
  return b == null ? 'n/a' : (b / 1048576).toFixed(1);
}
const ok = (rs) => (rs ?? []).filter((x) => !x.error);
const stat = (rs, key) => {
  const v = ok(rs)
    .map((x) => x[key])
    .filter((x) => typeof x === 'number' && Number.isFinite(x));
  return v.length ? { med: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length } : null;
};
/** lanemux ÷ a baseline's runs, paired per round: throughput, CPU per token, pass p50 and p99. */
const vsBase = (rs, base) => ({
  tokens_per_s: paired(rs, base, 'tokens_per_s'),
  cpu: paired(rs, base, 'total_cpu_us_per_token'),
  p50: paired(rs, base, 'pass_latency_p50_ms'),
  p99: paired(rs, base, 'pass_latency_p99_ms'),
});
const paired = (a, b, key) => {
  const rs = [];
  for (let i = 0; i < Math.min(a?.length ?? 0, b?.length ?? 0); i++) {
    if (a[i].error || b[i].error) continue;
    const x = a[i][key];
    const y = b[i][key];
    if (typeof x === 'number' && typeof y === 'number' && y > 0) rs.push(x / y);
  }
  return median(rs);
};
const fNum = (v, d = 2) => {
  if (v == null) return 'n/a';
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(2)} M`;
  if (Math.abs(v) >= 1e4) return `${Math.round(v / 1e3)} k`;
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  return v.toFixed(d);
};
const fS = (s, d = 2) =>
  s === null ? 'n/a' : rounds > 1 ? `${fNum(s.med, d)} [${fNum(s.min, d)}–${fNum(s.max, d)}]` : fNum(s.med, d);
const fx = (v) => (v == null ? '–' : v >= 10 ? `${v.toFixed(0)}×` : v >= 1 ? `${v.toFixed(2)}×` : `${v.toFixed(2)}×`);

const md = [];
const summary = {
  scale: [],
  decode: [],
  tpw: [],
  lifecycle: [],
  memory: null,
  churn: null,
  latency: [],
  lanes: [],
  lanesWt: [],
};
md.push(
  `lanemux benchmark — ${info.date}, ${info.nproc} vCPU ${info.cpu_model}, Node ${info.node}, commit ${info.git_commit}${info.src_dirty ? ' (src modified)' : ''}, ` +
    `${rounds} round(s)${quick ? ', --quick (tiny sizes: a smoke check)' : ''}; median [min–max] over rounds; ratios paired per round.`,
);

if (want(1)) {
  md.push(
    '',
    '### 1. Decode shape (64-byte tokens, one token per stream per pass; sender and receiver in separate processes)',
    '',
  );
  md.push(
    '| X streams | Y peers | W | implementation | tokens/s | CPU µs/token (both) | pass p50 ms | pass p99 ms | tokens/write | tok/s ÷ (d) | CPU ÷ (d) | p50 ÷ (d) | tok/s ÷ per-stream | tok/s ÷ yamux |',
  );
  md.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const shape of SHAPES) {
    const cell = raw.decode[shapeKey(shape)] ?? {};
    for (const impl of IMPLS) {
      const rs = cell[impl.id];
      if (!rs) continue;
      const row = {
        x: shape.x,
        y: shape.y,
        w: shape.w,
        token_bytes: 64,
        impl: impl.id,
        name: impl.name,
        ok_runs: ok(rs).length,
        runs: rs.length,
        tokens_per_s: stat(rs, 'tokens_per_s'),
        cpu_us_per_token: stat(rs, 'total_cpu_us_per_token'),
        send_cpu_us_per_token: stat(rs, 'send_cpu_us_per_token'),
        recv_cpu_us_per_token: stat(rs, 'recv_cpu_us_per_token'),
        p50_ms: stat(rs, 'pass_latency_p50_ms'),
        p99_ms: stat(rs, 'pass_latency_p99_ms'),
        tokens_per_write: impl.id === 'd' ? { med: shape.x / shape.y } : stat(rs, 'tokens_per_write'),
        writes_per_pass: impl.id === 'd' ? { med: shape.y } : stat(rs, 'writes_per_pass'),
        vs_d: {
          tokens_per_s: paired(rs, cell.d, 'tokens_per_s'),
          cpu: paired(rs, cell.d, 'total_cpu_us_per_token'),
          p50: paired(rs, cell.d, 'pass_latency_p50_ms'),
        },
        vs_h2: vsBase(rs, cell.h2),
        vs_sse: vsBase(rs, cell['h2-sse']),
        vs_per_stream: paired(rs, cell['per-stream'], 'tokens_per_s'),
        vs_yamux: paired(rs, cell.yamux, 'tokens_per_s'),
        errors: rs.filter((x) => x.error).map((x) => String(x.error).slice(0, 300)),
      };
      summary.decode.push(row);
      const name = impl.mux ? `**${impl.name}**` : impl.name;
      const tpw = row.tokens_per_write
        ? fNum(row.tokens_per_write.med, 1)
        : impl.id === 'yamux' || impl.id === 'ws'
          ? '1 (per send)'
          : impl.id.startsWith('h2')
            ? '1 (per stream.write)'
            : 'n/a';
      const isD = impl.id === 'd';
      md.push(
        `| ${shape.x} | ${shape.y} | ${shape.w} | ${name} | ${fS(row.tokens_per_s)} | ${fS(row.cpu_us_per_token)} | ${fS(row.p50_ms, 3)} | ${fS(row.p99_ms)} | ${tpw} | ` +
          `${isD ? '1' : fx(row.vs_d.tokens_per_s)} | ${isD ? '1' : fx(row.vs_d.cpu)} | ${isD ? '1' : fx(row.vs_d.p50)} | ${impl.id === 'per-stream' ? '1' : fx(row.vs_per_stream)} | ${impl.id === 'yamux' ? '1' : fx(row.vs_yamux)} |`,
      );
    }
  }
  md.push(
    '',
    'tokens/write: data records per write the engine made in the timed passes (lanemux: per batch; per-stream: one write per token). ' +
      'CPU is user+system of both processes over the timed passes. W = 8 rows measure throughput, W = 1 rows lockstep latency.',
  );
  md.push(
    '',
    '### 1b. lanemux beside node:http2 and SSE over HTTP/2 (the runs of table 1; ratios paired per round)',
    '',
    '| X streams | Y peers | W | implementation | tok/s ÷ node:http2 | CPU ÷ node:http2 | tok/s ÷ SSE | CPU ÷ SSE | pass p50 / p99 ms | node:http2 p50 / p99 ms | SSE p50 / p99 ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  );
  const pp = (row) => (row ? `${fS(row.p50_ms, 3)} / ${fS(row.p99_ms)}` : 'n/a');
  for (const shape of SHAPES) {
    const rows = summary.decode.filter((r) => r.x === shape.x && r.y === shape.y && r.w === shape.w);
    const h2 = rows.find((r) => r.impl === 'h2');
    const h2sse = rows.find((r) => r.impl === 'h2-sse');
    for (const row of rows) {
      if (!IMPLS.find((i) => i.id === row.impl)?.mux) continue;
      md.push(
        `| ${shape.x} | ${shape.y} | ${shape.w} | **${row.name}** | ${fx(row.vs_h2.tokens_per_s)} | ${fx(row.vs_h2.cpu)} | ${fx(row.vs_sse.tokens_per_s)} | ${fx(row.vs_sse.cpu)} | ${pp(row)} | ${pp(h2)} | ${pp(h2sse)} |`,
      );
    }
  }
  md.push(
    '',
    'node:http2: one unencrypted session per peer (h2c), one response stream per stream, one `stream.write` per 64-byte token. ' +
      'SSE: the same, each token one `data: {"type":"text-delta","id":"s<slot>","delta":"…"}` event (AI SDK UI-stream framing), JSON-parsed on receive. ' +
      'tok/s ÷ > 1 and CPU ÷ < 1 favour lanemux; the W = 1 rows set the lockstep p50 / p99 of the three side by side.',
  );
}

if (want(2) && raw.tpw.length) {
  md.push(
    '',
    "### 2. Tokens per write, the reference's decode shapes (3 frontends, credit 256, 20 tokens per request; one process)",
    '',
  );
  md.push(
    '| shape | legacy per-stream | mux Auto | mux Manual | reference legacy / Auto / Manual |',
    '|---|---|---|---|---|',
  );
  const { SHAPES: TS } = {
    SHAPES: [
      { id: '24 req / batch 8 / 1 ms', ref: '0.99–1.00 / 2.18–2.19 / 2.19' },
      { id: '96 req / batch 32 / 1 ms', ref: 'not run / 4.67–5.14 / 5.38' },
      { id: '24 req / batch 8 / no gap', ref: 'not run / 6.61–7.44 / 3.47–4.41' },
    ],
  };
  for (const sh of TS) {
    const cells = ['legacy', 'auto', 'manual'].map((mode) => {
      const v = ok(raw.tpw)
        .map((r) => r.rows.find((x) => x.shape === sh.id && x.mode === mode)?.tokens_per_write)
        .filter((x) => x != null);
      const s = v.length ? { med: median(v), min: Math.min(...v), max: Math.max(...v), runs: v } : null;
      summary.tpw.push({ shape: sh.id, mode, tokens_per_write: s });
      return s ? `${s.med.toFixed(2)} [${s.min.toFixed(2)}–${s.max.toFixed(2)}]` : 'n/a';
    });
    md.push(`| ${sh.id} | ${cells.join(' | ')} | ${sh.ref} |`);
  }
  md.push('', `${raw.tpw.length} run(s); median [min–max]. Legacy writes include each stream's terminal frame.`);
}

if (want(3)) {
  md.push(
    '',
    '### 3. Stream lifecycle: open + 4 items of 16 B + close, 64 in flight (both nodes in one process, as the reference measured it)',
    '',
  );
  md.push(
    '| path | streams/s | CPU µs per stream (both sides) | first item p50 / p99 ms | whole stream p50 / p99 ms | ÷ per-stream CPU | ÷ yamux CPU |',
    '|---|---|---|---|---|---|---|',
  );
  for (const mode of LIFE) {
    const rs = raw.lifecycle[mode];
    const row = {
      mode,
      streams_per_s: stat(rs, 'streams_per_s'),
      cpu_us_per_stream: stat(rs, 'cpu_us_per_stream'),
      first_p50: stat(rs, 'first_item_p50_ms'),
      first_p99: stat(rs, 'first_item_p99_ms'),
      stream_p50: stat(rs, 'stream_p50_ms'),
      stream_p99: stat(rs, 'stream_p99_ms'),
      vs_per_stream_cpu: paired(rs, raw.lifecycle['per-stream'], 'cpu_us_per_stream'),
      vs_yamux_cpu: paired(rs, raw.lifecycle.yamux, 'cpu_us_per_stream'),
    };
    summary.lifecycle.push(row);
    const label = {
      attach: 'lanemux attach',
      'zero-rtt': 'lanemux zero-RTT',
      'per-stream': 'per-stream path',
      yamux: 'yamux stream open',
      'attach-0': 'lanemux attach, open + close only (0 items)',
      'zero-rtt-0': 'lanemux zero-RTT, open + close only (0 items)',
    }[mode];
    const first = row.first_p50 === null ? '–' : `${fS(row.first_p50, 2)} / ${fS(row.first_p99, 2)}`;
    md.push(
      `| ${label} | ${fS(row.streams_per_s)} | ${fS(row.cpu_us_per_stream, 1)} | ${first} | ${fS(row.stream_p50, 2)} / ${fS(row.stream_p99, 2)} | ${fx(row.vs_per_stream_cpu)} | ${fx(row.vs_yamux_cpu)} |`,
    );
  }
  md.push('', `${lifeN[0]} timed streams after ${lifeN[1]} warm-up per run.`);
}

if (want(4)) {
  summary.memory = {};
  md.push('', '### 4. Memory: streams whose consumer never reads (separate processes)', '');
  md.push(
    '| streams × item | side | RSS growth MiB | heap+ArrayBuffer growth MiB | RSS ÷ peerByteBudget | heap ÷ peerByteBudget | credit bound X · C · item MiB | window peak ÷ peerByteBudget |',
    '|---|---|---|---|---|---|---|---|',
  );
  let first = {};
  for (const item of MEM_ITEMS) {
    const m = raw.memory[item] ?? [];
    const sm = (k) => stat(m, k);
    const row = {
      runs: m,
      recv_rss: sm('recv_rss_growth_bytes'),
      recv_heap: sm('recv_heap_growth_bytes'),
      send_rss: sm('send_rss_growth_bytes'),
      send_heap: sm('send_heap_growth_bytes'),
    };
    summary.memory[item] = row;
    first = ok(m)[0] ?? {};
    const fmb = (x) => (x === null ? 'n/a' : rounds > 1 ? `${mb(x.med)} [${mb(x.min)}–${mb(x.max)}]` : mb(x.med));
    const ratio = (x) =>
      x === null || !first.peer_byte_budget ? 'n/a' : `${(x.med / first.peer_byte_budget).toFixed(2)}×`;
    const shape = `${first.slots ?? '?'} × ${item} B`;
    const peak =
      first.recv_window_peak_bytes !== undefined && first.peer_byte_budget
        ? `${(first.recv_window_peak_bytes / first.peer_byte_budget).toFixed(2)}×`
        : 'n/a';
    md.push(
      `| ${shape} | receiver (stalled consumer) | ${fmb(row.recv_rss)} | ${fmb(row.recv_heap)} | ${ratio(row.recv_rss)} | ${ratio(row.recv_heap)} | ${first.credit_bound_bytes ? mb(first.credit_bound_bytes) : '?'} | ${peak} |`,
    );
    md.push(
      `| ${shape} | sender | ${fmb(row.send_rss)} | ${fmb(row.send_heap)} | ${ratio(row.send_rss)} | ${ratio(row.send_heap)} | | |`,
    );
  }
  md.push(
    '',
    `peerByteBudget ${first.peer_byte_budget ? mb(first.peer_byte_budget) : '?'} MiB. The receiver advertises it as its receive window: what it holds ` +
      "for one peer's unread records stays within it plus one batch, whatever X · C · item (the credit bound) would allow. The sender's withheld queues share `peerByteBudget` too.",
  );
  const c = ok(raw.churn)[0];
  summary.churn = c ?? null;
  md.push(
    '',
    c
      ? `Churn: ${c.n.toLocaleString('en-US')} streams opened and closed (attach, 4 items each, 64 in flight, after ${c.warm} warm-up): heap growth after GC ` +
          `${mb(c.heap_growth_bytes)} MiB (${Math.round(c.heap_growth_bytes / c.n)} B per stream), RSS growth ${mb(c.rss_growth_bytes)} MiB, live slots at the end ${c.live_after}.`
      : 'Churn: ERROR',
  );
}

if (want(5)) {
  md.push('', '### 5. Latency: one stream, one 64-byte token every 10 ms (separate processes)', '');
  md.push(
    '| flush policy | one-way p50 ms | p99 ms | added p50 over raw socket ms | added p99 ms |',
    '|---|---|---|---|---|',
  );
  const rawRs = raw.latency.raw;
  for (const mode of LAT) {
    const rs = raw.latency[mode];
    const added = (k) => {
      const d = [];
      for (let i = 0; i < Math.min(rs?.length ?? 0, rawRs?.length ?? 0); i++)
        if (!rs[i].error && !rawRs[i].error) d.push(rs[i][k] - rawRs[i][k]);
      return median(d);
    };
    const row = {
      mode,
      p50_ms: stat(rs, 'latency_p50_ms'),
      p99_ms: stat(rs, 'latency_p99_ms'),
      added_p50_ms: mode === 'raw' ? 0 : added('latency_p50_ms'),
      added_p99_ms: mode === 'raw' ? 0 : added('latency_p99_ms'),
    };
    summary.latency.push(row);
    const label = {
      raw: 'raw socket (floor)',
      auto: 'Auto (onAdmission)',
      linger: 'Auto, maxLinger 2 ms',
      'linger-complete': 'Auto, maxLinger 2 ms + onComplete',
      manual: 'Manual + flushBatch()',
    }[mode];
    md.push(
      `| ${label} | ${fS(row.p50_ms, 3)} | ${fS(row.p99_ms, 3)} | ${mode === 'raw' ? '–' : fNum(row.added_p50_ms, 3)} | ${mode === 'raw' ? '–' : fNum(row.added_p99_ms, 3)} |`,
    );
  }
}

if (want(6)) {
  md.push('', '### 6. Lanes: 64 streams of 16 KiB items over Node TCP (separate processes)', '');
  md.push('| lanes | MB/s | ÷ 1 lane | CPU µs per item (both) |', '|---|---|---|---|');
  for (const l of LANES) {
    const rs = raw.lanes[l];
    const row = {
      lanes: l,
      mb_per_s: stat(rs, 'mb_per_s'),
      cpu_us_per_item: stat(rs, 'cpu_us_per_item'),
      vs_1: paired(rs, raw.lanes[1], 'mb_per_s'),
    };
    summary.lanes.push(row);
    md.push(`| ${l} | ${fS(row.mb_per_s, 1)} | ${l === 1 ? '1' : fx(row.vs_1)} | ${fS(row.cpu_us_per_item, 1)} |`);
  }
  md.push('', '### 6b. Lanes over WebTransport, Deno → Deno: 64 streams of 16 KiB items (separate Deno processes)', '');
  md.push('| lanes | MB/s | ÷ 1 lane | CPU µs per item (both) |', '|---|---|---|---|');
  for (const l of LANES) {
    const rs = raw.lanesWt[l] ?? [];
    const row = {
      lanes: l,
      mb_per_s: stat(rs, 'mb_per_s'),
      cpu_us_per_item: stat(rs, 'cpu_us_per_item'),
      vs_1: paired(rs, raw.lanesWt[1] ?? [], 'mb_per_s'),
    };
    summary.lanesWt.push(row);
    md.push(`| ${l} | ${fS(row.mb_per_s, 1)} | ${l === 1 ? '1' : fx(row.vs_1)} | ${fS(row.cpu_us_per_item, 1)} |`);
  }
}
if (want(7)) {
  md.push(
    '',
    `### 7. Scale: X streams on 1 peer, and ${SCALE_YX.toLocaleString('en-US')} streams over Y peers (64-byte tokens, W = ${SCALE_W}; separate processes)`,
    '',
    '| X streams | Y peers | implementation | tokens/s | CPU µs/token (both) | pass p50 ms | pass p99 ms | tok/s ÷ (d) | CPU ÷ (d) | tok/s ÷ node:http2 | CPU ÷ node:http2 |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const pt of SCALE_POINTS) {
    const cell = raw.scale[`X=${pt.x} Y=${pt.y}`] ?? {};
    for (const impl of SCALE_IMPLS) {
      const rs = cell[impl.id];
      if (!rs) continue;
      const row = {
        x: pt.x,
        y: pt.y,
        w: SCALE_W,
        impl: impl.id,
        name: impl.name,
        ok_runs: ok(rs).length,
        runs: rs.length,
        tokens_per_s: stat(rs, 'tokens_per_s'),
        cpu_us_per_token: stat(rs, 'total_cpu_us_per_token'),
        p50_ms: stat(rs, 'pass_latency_p50_ms'),
        p99_ms: stat(rs, 'pass_latency_p99_ms'),
        vs_d: vsBase(rs, cell.d),
        vs_h2: vsBase(rs, cell.h2),
        errors: rs.filter((x) => x.error).map((x) => String(x.error).slice(0, 300)),
      };
      summary.scale.push(row);
      const one = (id) => impl.id === id;
      md.push(
        `| ${pt.x} | ${pt.y} | ${impl.mux ? `**${impl.name}**` : impl.name} | ${fS(row.tokens_per_s)} | ${fS(row.cpu_us_per_token)} | ${fS(row.p50_ms, 3)} | ${fS(row.p99_ms)} | ` +
          `${one('d') ? '1' : fx(row.vs_d.tokens_per_s)} | ${one('d') ? '1' : fx(row.vs_d.cpu)} | ${one('h2') ? '1' : fx(row.vs_h2.tokens_per_s)} | ${one('h2') ? '1' : fx(row.vs_h2.cpu)} |`,
      );
    }
  }
  const series = (pick, key) =>
    SCALE_IMPLS.map((impl) => ({
      name: impl.id === 'auto' ? 'lanemux Auto (push read)' : impl.id === 'h2' ? 'node:http2' : impl.name,
      points: summary.scale
        .filter((row) => row.impl === impl.id && pick(row))
        .map((row) => ({ x: pick(row), y: row[key]?.med ?? null })),
    }));
  const byX = (row) => (row.y === 1 ? row.x : null);
  const byY = (row) => (row.x === SCALE_YX ? row.y : null);
  const yx = SCALE_YX.toLocaleString('en-US');
  const svg = svgChart({
    title: 'lanemux cost curve: tokens/s and CPU per token as streams and peers grow',
    caption: `64-byte tokens, one per stream per pass, ${SCALE_W} passes in flight; medians of ${rounds} round(s); ${info.nproc} vCPU ${info.cpu_model ?? ''}, Node ${info.node}, commit ${info.git_commit}, ${info.date.slice(0, 16).replace('T', ' ')} UTC`,
    panels: [
      {
        title: 'Throughput, 1 peer',
        xLabel: 'X streams',
        yLabel: 'tokens/s',
        xLog: true,
        series: series(byX, 'tokens_per_s'),
      },
      {
        title: 'CPU per token, 1 peer',
        xLabel: 'X streams',
        yLabel: 'CPU µs per token (both processes)',
        xLog: true,
        series: series(byX, 'cpu_us_per_token'),
      },
      {
        title: `Throughput, ${yx} streams in all`,
        xLabel: 'Y peers',
        yLabel: 'tokens/s',
        xLog: true,
        series: series(byY, 'tokens_per_s'),
      },
      {
        title: `CPU per token, ${yx} streams in all`,
        xLabel: 'Y peers',
        yLabel: 'CPU µs per token (both processes)',
        xLog: true,
        series: series(byY, 'cpu_us_per_token'),
      },
    ],
  });
  fs.mkdirSync(path.dirname(svgPath), { recursive: true });
  fs.writeFileSync(svgPath, svg);
  md.push(
    '',
    `Chart: ${path.relative(repoRoot, svgPath)}. Y-series rows spread ${yx} streams over Y peers (stream s on peer s % Y).`,
  );
}
md.push(
  '',
  `Load average (1 min) at start ${info.loadavg_at_start[0].toFixed(2)}, at end ${os.loadavg()[0].toFixed(2)}. Total ${Math.round(totalS)} s. Command: \`${process.argv.length > 2 ? `node bench/run.mjs ${process.argv.slice(2).join(' ')}` : 'npm run bench'}\`. JSON: ${path.relative(repoRoot, jsonPath)}.`,
);
const text = md.join('\n');
process.stdout.write(text + '\n');
fs.mkdirSync(path.dirname(jsonPath), { recursive: true });
fs.writeFileSync(
  jsonPath,
  JSON.stringify(
    {
      machine: info,
      argv: process.argv.slice(2),
      quick,
      rounds,
      total_s: totalS,
      failures,
      summary,
      raw,
      markdown: text,
    },
    null,
    1,
  ),
);
log(`wrote ${jsonPath}`);
if (failures > 0) {
  log(`bench: ${failures} benchmark run(s) failed`);
  process.exit(1);
}

function machine() {
  let model = null;
  try {
    model = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [])[1] ?? null;
  } catch {}
  let commit = null;
  let dirty = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
    dirty =
      execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: repoRoot, encoding: 'utf8' }).trim() !== '';
  } catch {}
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism?.() ?? os.cpus().length,
    cpu_model: model,
    node: process.version,
    kernel: os.release(),
    loadavg_at_start: os.loadavg(),
    git_commit: commit,
    src_dirty: dirty,
  };
}
