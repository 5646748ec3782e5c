#!/usr/bin/env node
// `npm run bench`: lanemux against the shared perf anchors, in one invocation.
//
// Each round runs, interleaved, the anchors (`../shared/bench-anchors/tcp-baselines.mjs`
// variants c, d, a) and lanemux's mux-bench (Auto, Manual) in the same shapes — X slots of 64-byte
// tokens, Y peers, one token per slot per pass, W = 8 (throughput) and W = 1 (lockstep) — then,
// once, the codec micro-bench and the transport bench. It prints one table where every lanemux row
// carries its absolute figures and its ratios to anchors (c), (d) and (a) measured in the same
// invocation: per-round paired ratios, median over rounds (absolute numbers drift ±2× between runs
// on 2 vCPUs; ratios drift much less).
//
// Usage (after `npm run build`; `npm run bench` builds first):
//   node test/bench/run.mjs [--rounds 3] [--quick] [--json out.json] [--only substring]
//        [--passes 2000] [--warm 2000]          X = 256 passes (timed / warm-up)
//        [--passes-big 500] [--warm-big 500]    X = 1024 passes
//        [--skip x1024,y4,credit,micro,a]       leave groups out
// Exit status: 0 unless a scenario failed (twice) or a child broke; slow numbers never fail it.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { anchorsDir, distDir, repoRoot, lib } from './anchors.mjs';

const { parseArgs } = lib;
const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs();
if (args.help === 'true') {
  process.stdout.write(fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1, 17).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n');
  process.exit(0);
}
const quick = args.quick === 'true';
const rounds = Number(args.rounds ?? (quick ? 1 : 3));
const P = ['--passes', args.passes ?? (quick ? '200' : '2000'), '--warm', args.warm ?? (quick ? '100' : '2000')];
const P_A = quick ? ['--passes', '100', '--warm', '50'] : P; // (a) is ~20× slower per token
const P_BIG = ['--passes', args['passes-big'] ?? (quick ? '50' : '500'), '--warm', args['warm-big'] ?? (quick ? '20' : '500')];
const skip = new Set(String(args.skip ?? '').split(',').filter(Boolean));
const jsonPath = args.json && args.json !== 'true' ? path.resolve(args.json) : null;
const childTimeoutMs = 90_000;

if (!fs.existsSync(path.join(distDir, 'index.js'))) {
  console.error(`bench: ${distDir}/index.js is missing: run \`npm run build\` first (npm run bench does)`);
  process.exit(2);
}

const TCP = path.join(anchorsDir, 'tcp-baselines.mjs');
const MUX = path.join(here, 'mux-bench.mjs');

// [id, group, script, args, shape]; shape ties a row to its anchors: `${slots}x${peers}`.
const scenarios = [];
const add = (id, group, script, a, shape, win) => scenarios.push({ id, group, script, args: [...a, '--window', String(win)], shape, win });
for (const w of [8, 1]) {
  add(`(c) ideal batching W${w}`, 'base', TCP, ['--variant', 'c', ...P], '256x1', w);
  add(`(d) hand protocol W${w}`, 'base', TCP, ['--variant', 'd', ...P], '256x1', w);
  add(`lanemux Auto W${w}`, 'base', MUX, ['--flush', 'auto', ...P], '256x1', w);
  add(`lanemux Manual W${w}`, 'base', MUX, ['--flush', 'manual', ...P], '256x1', w);
  if (!skip.has('a')) add(`(a) per-stream TCP W${w}`, 'base', TCP, ['--variant', 'a', ...P_A], '256x1', w);
}
if (!skip.has('credit')) {
  add('lanemux Auto C=256 W8', 'credit', MUX, ['--flush', 'auto', '--credit', '256', ...P], '256x1', 8);
  add('lanemux Manual C=256 W8', 'credit', MUX, ['--flush', 'manual', '--credit', '256', ...P], '256x1', 8);
}
if (!skip.has('x1024')) {
  const X = ['--slots', '1024', ...P_BIG];
  add('(c) ideal batching X=1024 W8', 'x1024', TCP, ['--variant', 'c', ...X], '1024x1', 8);
  add('(d) hand protocol X=1024 W8', 'x1024', TCP, ['--variant', 'd', ...X], '1024x1', 8);
  add('lanemux Auto X=1024 W8', 'x1024', MUX, ['--flush', 'auto', ...X], '1024x1', 8);
  add('lanemux Manual X=1024 W8', 'x1024', MUX, ['--flush', 'manual', ...X], '1024x1', 8);
  if (!skip.has('a')) add('(a) per-stream TCP X=1024 W8', 'x1024', TCP, ['--variant', 'a', ...X], '1024x1', 8);
}
if (!skip.has('y4')) {
  for (const w of [8, 1]) {
    add(`(d) hand protocol Y=4 W${w}`, 'y4', TCP, ['--variant', 'd', '--peers', '4', ...P], '256x4', w);
    add(`lanemux Auto Y=4 W${w}`, 'y4', MUX, ['--flush', 'auto', '--peers', '4', ...P], '256x4', w);
    add(`lanemux Manual Y=4 W${w}`, 'y4', MUX, ['--flush', 'manual', '--peers', '4', ...P], '256x4', w);
  }
}
const selected = scenarios.filter((s) => !args.only || s.id.includes(args.only));

function runChild(script, a, { timeoutMs = childTimeoutMs, env = {}, json = true } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const k = spawn(process.execPath, [script, ...a], { cwd: repoRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    k.stdout.on('data', (d) => (out += d));
    k.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => k.kill('SIGKILL'), timeoutMs); // by PID: only our own child
    k.on('exit', (code, sig) => {
      clearTimeout(timer);
      const elapsed = (Date.now() - t0) / 1000;
      if (!json) return resolve({ code, sig, out, err, elapsed });
      const lines = out.trim().split('\n').filter(Boolean);
      let res;
      try {
        res = JSON.parse(lines[lines.length - 1]);
      } catch {
        res = { error: `no JSON result (exit ${code} ${sig}): ${err.slice(-1500)}` };
      }
      if (code !== 0 && !res.error) res.error = `exit ${code} ${sig}: ${err.slice(-1500)}`;
      res._elapsed_s = elapsed;
      resolve(res);
    });
  });
}

const med = (a) => {
  const s = a.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((x, y) => x - y);
  const n = s.length;
  if (n === 0) return null;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

function machine() {
  let model = null;
  try {
    model = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [])[1] ?? null;
  } catch {}
  let commit = null;
  let dirty = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
    dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: repoRoot, encoding: 'utf8' }).trim() !== '';
  } catch {}
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism?.() ?? os.cpus().length,
    cpu_model: model,
    node: process.version,
    kernel: os.release(),
    loadavg_at_start: os.loadavg().map((x) => Math.round(x * 100) / 100),
    git_commit: commit,
    src_dirty: dirty,
  };
}

// ───────────────────────── run ─────────────────────────
const info = machine();
const tStart = Date.now();
const raw = new Map(selected.map((s) => [s.id, []]));
let failures = 0;
for (let r = 1; r <= rounds; r++) {
  for (const s of selected) {
    let res = await runChild(s.script, s.args);
    if (res.error) {
      process.stderr.write(`[round ${r}/${rounds}] ${s.id}: ERROR ${String(res.error).slice(0, 300)} — retrying once\n`);
      const first = res.error;
      res = await runChild(s.script, s.args);
      res._retried = first;
    }
    if (res.error) failures++;
    raw.get(s.id).push(res);
    process.stderr.write(
      `[round ${r}/${rounds}] ${s.id}: ${res.error ? 'ERROR ' + String(res.error).slice(0, 200) : `${(res.tokens_per_s ?? 0).toLocaleString('en-US')} tok/s, ` +
        `${res.total_cpu_us_per_token} µs/tok, p50 ${res.pass_latency_p50_ms} ms`} (${res._elapsed_s}s)\n`,
    );
  }
}

// Micro-benchmarks, once (no anchors to pair with; their own tables carry medians of 5 runs).
const micro = {};
if (!skip.has('micro') && !args.only) {
  process.stderr.write('codec micro-bench …\n');
  const codecEnv = quick ? { BENCH_RUN_MS: '50', BENCH_WARMUP_MS: '50' } : {};
  const c = await runChild(path.join(here, 'codec.mjs'), [], { json: false, env: codecEnv, timeoutMs: 120_000 });
  micro.codec = { exit: c.code, elapsed_s: c.elapsed, text: c.out.trim(), rows: parseCodec(c.out) };
  if (c.code !== 0) {
    failures++;
    micro.codec.error = c.err.slice(-1500);
  }
  process.stderr.write('transport bench …\n');
  const tArgs = quick ? ['--messages', '30000', '--rtts', '300'] : [];
  const t = await runChild(path.join(here, 'transport-bench.mjs'), tArgs, { json: false, timeoutMs: 180_000 });
  micro.transport = { exit: t.code, elapsed_s: t.elapsed, text: t.out.trim(), rows: parseConsoleTable(t.out) };
  if (t.code !== 0) {
    failures++;
    micro.transport.error = t.err.slice(-1500);
  }
}

function parseCodec(text) {
  const rows = [];
  for (const line of text.split('\n')) {
    const m = line.match(/^(\S.*?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$/);
    if (m) rows.push({ case: m[1].trim(), bytes: Number(m[2]), median_ns: Number(m[3]), min_ns: Number(m[4]), max_ns: Number(m[5]), m_rec_per_s: Number(m[6]) });
  }
  return rows;
}

function parseConsoleTable(text) {
  const lines = text.split('\n').filter((l) => l.startsWith('│'));
  if (lines.length < 2) return [];
  const cells = (l) => l.split('│').slice(1, -1).map((c) => c.trim().replace(/^'(.*)'$/, '$1'));
  const head = cells(lines[0]);
  return lines.slice(1).map((l) => Object.fromEntries(cells(l).map((c, i) => [head[i], c])).valueOf());
}

// ───────────────────────── aggregate ─────────────────────────
const NUM_KEYS = ['tokens_per_s', 'total_cpu_us_per_token', 'send_cpu_us_per_token', 'recv_cpu_us_per_token', 'pass_latency_p50_ms', 'pass_latency_p99_ms',
  'pass_interval_p50_ms', 'tokens_per_batch', 'batches_per_pass', 'credit_batches_back_per_pass', 'send_credit_exhausted', 'manual_rescue_flushes',
  'send_cpu_util', 'recv_cpu_util', 'send_writes_total', 'passes', 'warm', 'slots'];
const summary = {};
for (const s of selected) {
  const ok = raw.get(s.id).filter((x) => !x.error);
  const agg = { group: s.group, shape: s.shape, window: s.win, command: `node ${path.relative(repoRoot, s.script)} ${s.args.join(' ')}`, ok_runs: ok.length, runs: raw.get(s.id).length };
  for (const k of NUM_KEYS) {
    const v = med(ok.map((x) => x[k]));
    if (v !== null) agg[k] = v;
  }
  // anchors: tokens per socket write = tokens / writes over warm + timed passes
  if (agg.send_writes_total) agg.tokens_per_write = (agg.slots * (agg.passes + agg.warm)) / agg.send_writes_total;
  else if (agg.tokens_per_batch) agg.tokens_per_write = agg.tokens_per_batch;
  const errs = raw.get(s.id).filter((x) => x.error).map((x) => String(x.error).slice(0, 500));
  if (errs.length) agg.errors = errs;
  summary[s.id] = agg;
}

// Paired ratios: lanemux round r ÷ anchor round r, median over rounds.
const anchorIds = (shape, w) => {
  const byVariant = {};
  for (const s of selected) {
    if (s.script !== TCP || s.win !== w) continue;
    const v = s.args[s.args.indexOf('--variant') + 1];
    if (s.shape === shape) byVariant[v] = s.id;
  }
  // (a) is one connection per stream whatever the peer count; (c) has no peers either.
  if (shape === '256x4') {
    for (const v of ['a', 'c']) {
      const alt = selected.find((s) => s.script === TCP && s.win === w && s.shape === '256x1' && s.args.includes(v) && s.args[s.args.indexOf('--variant') + 1] === v);
      if (alt && !byVariant[v]) byVariant[v] = alt.id;
    }
  }
  return byVariant;
};
const pairedRatio = (aId, bId, key) => {
  const a = raw.get(aId) ?? [];
  const b = raw.get(bId) ?? [];
  const rs = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i].error || b[i].error) continue;
    if (typeof a[i][key] === 'number' && typeof b[i][key] === 'number' && b[i][key] > 0) rs.push(a[i][key] / b[i][key]);
  }
  return med(rs);
};
const rows = [];
for (const s of selected) {
  if (s.script !== MUX || s.win !== 8) continue;
  const lock = selected.find((x) => x.script === MUX && x.win === 1 && x.id === s.id.replace('W8', 'W1'));
  const anchors8 = anchorIds(s.shape, 8);
  const anchors1 = anchorIds(s.shape, 1);
  const row = { id: s.id.replace(' W8', ''), w8: s.id, w1: lock?.id ?? null, shape: s.shape, ratios: {} };
  for (const v of ['c', 'd', 'a']) {
    const r = {};
    if (anchors8[v]) {
      r.tokens_per_s = pairedRatio(s.id, anchors8[v], 'tokens_per_s');
      r.cpu_us_per_token = pairedRatio(s.id, anchors8[v], 'total_cpu_us_per_token');
    }
    if (lock && anchors1[v]) {
      r.p50 = pairedRatio(lock.id, anchors1[v], 'pass_latency_p50_ms');
      r.p99 = pairedRatio(lock.id, anchors1[v], 'pass_latency_p99_ms');
    }
    if (Object.keys(r).length) row.ratios[v] = { anchor_w8: anchors8[v] ?? null, anchor_w1: anchors1[v] ?? null, ...r };
  }
  rows.push(row);
}

// ───────────────────────── print ─────────────────────────
const f0 = (v) => (v == null ? 'n/a' : Math.round(v).toLocaleString('en-US'));
const fM = (v) => (v == null ? 'n/a' : v >= 1e6 ? `${(v / 1e6).toFixed(2)} M` : v >= 1e3 ? `${Math.round(v / 1e3)} k` : f0(v));
const fd = (v, d = 2) => (v == null ? 'n/a' : v.toFixed(d));
const fx = (v) => (v == null ? '–' : v >= 10 ? `${v.toFixed(0)}×` : v >= 1 ? `${v.toFixed(1)}×` : `${v.toFixed(2)}×`);
const lat = (id) => {
  const x = id ? summary[id] : null;
  return x && x.pass_latency_p50_ms != null ? `${fd(x.pass_latency_p50_ms, 3)} / ${fd(x.pass_latency_p99_ms, 2)}` : '—';
};
const lines = [];
const title = `lanemux vs perf anchors — ${info.date.slice(0, 10)}, Node ${info.node}, ${info.nproc} vCPU ${info.cpu_model ?? ''}, ` +
  `${rounds} round(s)${quick ? ' (--quick: numbers meaningless)' : ''}, median of rounds`;
lines.push(title, '');
lines.push('| scenario | tokens/s (W 8) | CPU µs/token (both) | lockstep pass p50 / p99 ms (W 1) | tokens/write | tokens/s ÷ (c) · (d) · (a) | CPU ÷ (c) · (d) · (a) | lockstep p50 ÷ (c) · (d) · (a) |');
lines.push('|---|---|---|---|---|---|---|---|');
const shapes = [...new Set(selected.map((s) => s.shape))];
const shapeName = { '256x1': 'X = 256, Y = 1', '1024x1': 'X = 1024, Y = 1', '256x4': 'X = 256, Y = 4' };
for (const shape of shapes) {
  if (shapes.length > 1) lines.push(`| **${shapeName[shape] ?? shape}** | | | | | | | |`);
  for (const s of selected) {
    if (s.shape !== shape || s.win !== 8) continue;
    const a = summary[s.id];
    const lockId = selected.find((x) => x.win === 1 && x.id === s.id.replace('W8', 'W1'))?.id;
    const name = s.id.replace(' W8', '');
    const isMux = s.script === MUX;
    if (!a.ok_runs) {
      lines.push(`| ${name} | ERROR: ${(a.errors?.[0] ?? '').slice(0, 100).replace(/\|/g, '/')} | | | | | | |`);
      continue;
    }
    let rt = '';
    let rc = '';
    let rl = '';
    if (isMux) {
      const row = rows.find((r) => r.w8 === s.id);
      const g = (v, k) => fx(row.ratios[v]?.[k]);
      rt = `${g('c', 'tokens_per_s')} · **${g('d', 'tokens_per_s')}** · ${g('a', 'tokens_per_s')}`;
      rc = `${g('c', 'cpu_us_per_token')} · **${g('d', 'cpu_us_per_token')}** · ${g('a', 'cpu_us_per_token')}`;
      rl = lockId ? `${g('c', 'p50')} · **${g('d', 'p50')}** · ${g('a', 'p50')}` : '';
    }
    const tpw = a.tokens_per_write != null ? fd(a.tokens_per_write, a.tokens_per_write >= 10 ? 0 : 1) : 'n/a';
    lines.push(`| ${isMux ? name : `*${name}*`} | ${fM(a.tokens_per_s)} | ${fd(a.total_cpu_us_per_token)} | ${lat(lockId)} | ${tpw} | ${rt} | ${rc} | ${rl} |`);
  }
}
lines.push('');
lines.push('Ratios are lanemux ÷ anchor, paired per round, median over rounds: tokens/s above 1× is faster; CPU and latency above 1× cost more.');
lines.push('Y = 4 rows pair with (d) Y = 4; their (c)/(a) columns use the X = 256 rows ((a) is one connection per stream whatever Y).');
lines.push('tokens/write: lanemux data records per batch written by the engine in the timed section; anchors: tokens per socket.write.');
const credit = Object.entries(summary).filter(([id]) => (id.startsWith('lanemux') || id.startsWith('(d)')) && id.endsWith('W8'));
lines.push('', '| W 8 run | send / recv CPU µs/token | send / recv CPU util | batches/pass | credit batches back/pass | credit-starved slot episodes | Manual rescue flushes |', '|---|---|---|---|---|---|---|');
for (const [id, a] of credit) {
  if (!a.ok_runs) continue;
  const anchor = !id.startsWith('lanemux');
  if (anchor) {
    lines.push(`| *${id.replace(' W8', '')}* | ${fd(a.send_cpu_us_per_token)} / ${fd(a.recv_cpu_us_per_token)} | ${fd(a.send_cpu_util)} / ${fd(a.recv_cpu_util)} | ${fd(a.send_writes_total / (a.passes + a.warm), 2)} | – | – | – |`);
    continue;
  }
  lines.push(`| ${id.replace(' W8', '')} | ${fd(a.send_cpu_us_per_token)} / ${fd(a.recv_cpu_us_per_token)} | ${fd(a.send_cpu_util)} / ${fd(a.recv_cpu_util)} | ${fd(a.batches_per_pass, 2)} | ${fd(a.credit_batches_back_per_pass, 3)} | ${f0(a.send_credit_exhausted)} | ${f0(a.manual_rescue_flushes)} |`);
}
if (micro.codec?.rows?.length) {
  lines.push('', '| codec case | ns/record (median of 5) |', '|---|---|');
  for (const r of micro.codec.rows) lines.push(`| ${r.case} | ${fd(r.median_ns, 1)} |`);
}
if (micro.transport?.rows?.length) {
  const keys = Object.keys(micro.transport.rows[0]).filter((k) => k !== '(index)');
  lines.push('', `| ${keys.join(' | ')} |`, `|${keys.map(() => '---').join('|')}|`);
  for (const r of micro.transport.rows) lines.push(`| ${keys.map((k) => r[k]).join(' | ')} |`);
}
const totalS = (Date.now() - tStart) / 1000;
lines.push('', `total ${totalS.toFixed(0)} s; anchors: ${path.relative(repoRoot, anchorsDir)}; commit ${info.git_commit ?? '?'}${info.src_dirty ? ' (src modified)' : ''}`);
const md = lines.join('\n');
process.stdout.write(md + '\n');

if (jsonPath) {
  const rawOut = Object.fromEntries([...raw].map(([id, rs]) => [id, rs]));
  fs.mkdirSync(path.dirname(jsonPath), { recursive: true });
  fs.writeFileSync(jsonPath, JSON.stringify({ machine: info, argv: process.argv.slice(2), rounds, quick, total_s: totalS, summary, lanemux_rows: rows, micro, raw: rawOut, markdown: md }, null, 1));
  process.stderr.write(`wrote ${jsonPath}\n`);
}
if (failures > 0) {
  process.stderr.write(`bench: ${failures} scenario run(s) failed\n`);
  process.exit(1);
}
