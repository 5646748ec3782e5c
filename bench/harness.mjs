// The benchmark harness every decode-shape script shares: a clock common to the processes of one
// run, the 64-byte token format, the receiver's pass tracker, the sender's pass driver (window of W
// un-acked passes, warm-up barrier) and the orchestration of a sender/receiver process pair.
// Every benchmark child prints exactly one JSON result line on stdout.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const distDir = resolve(process.env.LANEMUX_DIST ?? join(repoRoot, 'dist'));

/** Import a module of the built lanemux output (dist/). */
export function dist(rel) {
  if (!existsSync(join(distDir, 'index.js')))
    throw new Error(`${distDir}/index.js is missing: run \`npm run build\` first`);
  return import(pathToFileURL(join(distDir, rel)).href);
}

// Both processes of a pair read CLOCK_MONOTONIC relative to the BASE the orchestrator passes, so a
// timestamp written by the sender can be subtracted from the receiver's clock.
const BASE = process.env.BENCH_BASE ? BigInt(process.env.BENCH_BASE) : process.hrtime.bigint();
/** Milliseconds since the pair's common base. */
export const now = () => Number(process.hrtime.bigint() - BASE) / 1e6;

export function parseArgs(argv = process.argv.slice(2)) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) continue;
    const k = argv[i].slice(2);
    o[k] = i + 1 < argv.length && !argv[i + 1].startsWith('--') ? argv[++i] : 'true';
  }
  return o;
}

export const round = (x, d = 3) => Math.round(x * 10 ** d) / 10 ** d;
/** Nearest-rank percentile of an ascending array. */
export function pct(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
export const median = (xs) => {
  const s = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export const emit = (obj) => new Promise((res) => process.stdout.write(JSON.stringify(obj) + '\n', res));
export async function emitAndExit(obj, code = 0) {
  await emit(obj);
  process.exit(code);
}
/** A child that outlives `ms` reports an error and exits. */
export function watchdog(ms, label) {
  setTimeout(() => emitAndExit({ role: label, error: `watchdog: exceeded ${ms} ms` }, 2), ms).unref();
}
export const cpuUs = (c) => c.user + c.system;

// ── Token: 64 bytes = [u32 pass][u32 slot][f64 pass start, ms since BASE][48 × 'a'] (big-endian) ──
export const TOKEN = 64;
const FILL = Buffer.alloc(TOKEN, 0x61);
export function fillToken(buf, off, pass, slot, tStart) {
  FILL.copy(buf, off, 0, TOKEN);
  buf.writeUInt32BE(pass, off);
  buf.writeUInt32BE(slot, off + 4);
  buf.writeDoubleBE(tStart, off + 8);
}
/** Pass number of a token (any Uint8Array). */
export const tokenPass = (u, off = 0) => ((u[off] << 24) | (u[off + 1] << 16) | (u[off + 2] << 8) | u[off + 3]) >>> 0;
/** Pass start stamp of a token (any Uint8Array). */
export const tokenStart = (u, off = 0) => new DataView(u.buffer, u.byteOffset + off, 16).getFloat64(8);

// ── String token: 64 ASCII characters = [8 hex pass][16-char pass start, ms since BASE][40 × 'a'] ──
// One per pass, sent on every stream (the slot is the stream's own), so the sender builds one string
// per pass rather than one per token: the bench's own cost stays as small as fillToken's.
const STR_PAD = 'a'.repeat(40);
/** The string token of a pass (a flat string, as a tokenizer's output would be). */
export function stringToken(pass, tStart) {
  const stamp = tStart.toFixed(6).padStart(16, '0').slice(-16);
  // Array#join yields a flat string: a concatenation would be a rope the encoder flattens per token.
  return [pass.toString(16).padStart(8, '0'), stamp, STR_PAD].join('');
}
/** Pass number of a string token. */
export const stringTokenPass = (t) => {
  // By hand: a slice and parseInt per token would bill the bench's own garbage to the receiver.
  let n = 0;
  for (let i = 0; i < 8; i++) {
    const c = t.charCodeAt(i);
    n = n * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return n;
};
/** Pass start stamp of a string token. */
export const stringTokenStart = (t) => Number.parseFloat(t.slice(8, 24));

/**
 * Receiver side: a pass is complete when `slots` tokens of it have arrived; the tracker then acks it
 * and, after the last pass, reports throughput, pass latency (completion − start stamp) and the
 * receiver's CPU over the timed passes (from the end of warm-up).
 */
export function passTracker({ slots, warm, passes, onAck, onDone, startOf = tokenStart }) {
  const total = warm + passes;
  const counts = new Int32Array(total);
  const tStart = new Float64Array(total);
  const tDone = new Float64Array(total);
  let cpu0 = null;
  return {
    /** `n` tokens of `pass` arrived; `tok` (at `off`) is one of them. */
    add(pass, n, tok, off = 0) {
      const c = (counts[pass] += n);
      if (c < slots) return;
      if (c > slots) throw new Error(`pass ${pass}: ${c} tokens for ${slots} slots`);
      tDone[pass] = now();
      tStart[pass] = startOf(tok, off);
      if (pass === warm - 1) cpu0 = process.cpuUsage();
      onAck(pass);
      if (pass !== total - 1) return;
      const cpu = cpuUs(process.cpuUsage(cpu0));
      const lats = [];
      for (let p = warm; p < total; p++) {
        if (tDone[p] === 0) throw new Error(`pass ${p} never completed`);
        lats.push(tDone[p] - tStart[p]);
      }
      lats.sort((a, b) => a - b);
      const wall = tDone[total - 1] - tStart[warm];
      const tokens = passes * slots;
      onDone({
        tokens,
        wall_ms: round(wall),
        tokens_per_s: Math.round((tokens / wall) * 1000),
        pass_latency_p50_ms: round(pct(lats, 50), 4),
        pass_latency_p99_ms: round(pct(lats, 99), 4),
        recv_cpu_us_per_token: round(cpu / tokens, 4),
      });
    },
  };
}

/**
 * Sender side: keeps at most `window` passes un-acked (acks are u32 pass numbers on `ctrl`). The
 * warm-up passes run first; the timed section starts once all of them are acked.
 */
export function passDriver({ warm, passes, window, sendPass, ctrl, onDone }) {
  const total = warm + passes;
  let sent = 0;
  let acked = 0;
  let cpu0 = null;
  let pend = null;
  const pump = () => {
    while (sent < total && sent - acked < window) {
      if (sent === warm) {
        if (acked < warm) return;
        cpu0 ??= process.cpuUsage();
      }
      sendPass(sent, now());
      sent++;
    }
  };
  ctrl.on('data', (chunk) => {
    if (pend !== null) chunk = Buffer.concat([pend, chunk]);
    pend = null;
    let off = 0;
    for (; chunk.length - off >= 4; off += 4) acked = Math.max(acked, chunk.readUInt32BE(off) + 1);
    if (off < chunk.length) pend = chunk.subarray(off);
    if (acked < total) return pump();
    if (cpu0 === 'done') return;
    const cpu = cpuUs(process.cpuUsage(cpu0));
    cpu0 = 'done';
    onDone({ send_cpu_us: cpu });
  });
  return { start: pump };
}

/**
 * The receiver's acks toward the sender's control connection, which may be accepted after the first
 * pass completed (the data path can be faster than its `connection` event): those acks wait for it.
 */
export function pendingAcks() {
  let write = null;
  const early = [];
  return {
    ack: (pass) => (write === null ? early.push(pass) : write(pass)),
    attach(sock) {
      write = ackWriter(sock);
      for (const pass of early.splice(0)) write(pass);
    },
  };
}

export function ackWriter(sock) {
  return (pass) => {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(pass, 0);
    sock.write(b);
  };
}

export const listen = (server, port = 0) =>
  new Promise((res, rej) => {
    server.once('error', rej);
    server.listen(port, '127.0.0.1', () => res(server.address().port));
  });

export const connect = (port) =>
  new Promise((res, rej) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.setNoDelay(true);
    s.once('error', rej);
    s.once('connect', () => {
      s.off('error', rej);
      res(s);
    });
  });

const PEER_ARG_MAX = 100_000;
/** The `--peer` object a pair's second child was given (inline JSON, or `-`: on stdin). */
export const peerOf = (args) => JSON.parse(args.peer === '-' ? readFileSync(0, 'utf8') : args.peer);

/**
 * Run `script` twice as a pair: the first child listens and prints `{"ready": true, ...}`, the second
 * gets that object as `--peer <json>`. Resolves with both result lines merged, or `{ error }`.
 * Children are killed by PID on timeout. BENCH_NODE_FLAGS adds node flags (e.g. --cpu-prof).
 */
export function runPair(script, firstArgs, secondArgs, timeoutMs = 60_000) {
  return new Promise((resolvePair) => {
    const env = { ...process.env, BENCH_BASE: process.hrtime.bigint().toString() };
    const flags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
    const kids = [];
    const results = [];
    let settled = false;
    const finish = (res) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Both results are in: a child still running (a sender waiting on its peer) has nothing left to say.
      const deadline = Date.now() + (res.error ? 0 : 300);
      const reap = () => {
        const alive = kids.filter((k) => k.exitCode === null && k.signalCode === null);
        if (alive.length === 0) return resolvePair(res);
        if (Date.now() >= deadline) {
          for (const k of alive) k.kill('SIGKILL');
          return resolvePair(res);
        }
        setTimeout(reap, 20);
      };
      reap();
    };
    const timer = setTimeout(() => finish({ error: `timeout after ${timeoutMs} ms` }), timeoutMs);
    const start = (args, onLine, stdin = null) => {
      const k = spawn(process.execPath, [...flags, script, ...args], {
        env,
        stdio: [stdin === null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
      kids.push(k);
      if (stdin !== null) k.stdin.end(stdin);
      k.on('error', (e) => finish({ error: `spawn ${script}: ${e.message}` }));
      let err = '';
      k.stderr.on('data', (d) => (err = (err + d).slice(-3000)));
      createInterface({ input: k.stdout }).on('line', (line) => {
        try {
          onLine(JSON.parse(line));
        } catch {}
      });
      k.on('exit', (code) => {
        if (code !== 0 && !settled)
          finish({ error: `child ${args.filter((a) => !a.startsWith('{')).join(' ')} exited ${code}: ${err}` });
      });
    };
    const onResult = (o) => {
      if (o.error) return finish({ error: o.error });
      results.push(o);
      if (results.length === 2) finish(Object.assign({}, ...results));
    };
    start(firstArgs, (o) => {
      if (!o.ready) return onResult(o);
      // One argument may not exceed 128 KiB (Linux MAX_ARG_STRLEN): 4,096 stream handles do, so a
      // large peer object goes through the child's stdin (`--peer -`, read by peerOf()).
      const peer = JSON.stringify(o);
      if (peer.length <= PEER_ARG_MAX) start([...secondArgs, '--peer', peer], onResult);
      else start([...secondArgs, '--peer', '-'], onResult, peer);
    });
  });
}

/** Merge a pass benchmark's two sides: CPU µs/token of the sender and of both processes. */
export function finalizePass(r, slots, passes) {
  if (r.error) return r;
  const out = { ...r };
  out.send_cpu_us_per_token = round(r.send_cpu_us / (slots * passes), 4);
  out.total_cpu_us_per_token = round(out.send_cpu_us_per_token + r.recv_cpu_us_per_token, 4);
  delete out.send_cpu_us;
  delete out.ready;
  delete out.role;
  return out;
}

/**
 * Standard main of a pass benchmark script: role dispatch, or (no --role) run the pair and print
 * one merged JSON line. `common` are the args both children get.
 */
export async function pairMain(script, args, common, { recv, send, extra = {}, post }) {
  const timeoutMs = Number(args.timeout ?? 55_000);
  if (args.role === 'recv') return recv();
  if (args.role === 'send') return send(peerOf(args));
  const r = await runPair(
    script,
    [...common, '--timeout', String(timeoutMs), '--role', 'recv'],
    [...common, '--timeout', String(timeoutMs), '--role', 'send'],
    timeoutMs + 5000,
  );
  const out = finalizePass(r, Number(extra.slots), Number(extra.passes));
  if (!out.error && post) post(out);
  await emitAndExit({ ...extra, ...out }, out.error ? 1 : 0);
}
