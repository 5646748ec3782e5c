/**
 * `npm run soak -- [--minutes 10] [--seed N] [--concurrency 16] [--no-resume]
 *                     [--resume-window-ms 30000] [--sample-s 5] [--cut-s 15] [--verbose] [--heap-snapshots]`
 *
 * Mixed load for a long time, to catch what grows: one consumer node listening on TCP and on
 * WebSocket, two producer nodes dialling it (one per transport) through TCP proxies that cut every
 * connection now and then (resume on: the producers re-dial and the streams carry on). Each producer
 * keeps `--concurrency` streams going: each opens, sends 1–40 numbered tokens (2 % also a large
 * record of 64–192 KiB), finalizes; a fifth of the readers are slow (a few ms per item), one in
 * twenty stalls for 0.5–2 s before reading. Every item is checked in order on arrival. Both producers
 * re-dial within ~50–70 ms (TCP: the connect's reconnect policy; WebSocket: the adapter's own back-off).
 *
 * A failed stream is a defect unless resume cannot save it by design: its link was down longer than
 * the resume window (the proxy saw no new connection within it; reason `window`), or resume is off.
 * `--verbose` logs each failed stream: its errors (code, `reason`, message, cause), the transport,
 * how far it got, and the cuts and re-links around it.
 *
 * Every `--sample-s` seconds (10; 4 for runs ≤ 2 minutes) the load pauses until every stream has
 * ended and one resume window (`--resume-window-ms`, 2,000; 1,000 for short runs) has passed, so the
 * sample sees retained memory, not the in-flight streams and the rings finished streams keep for a
 * late resume; then, after a full GC: RSS, heapUsed, arrayBuffers, and the nodes' live slots and
 * binds (node.metrics()); the peaks of slots and binds are read under load, every second. After the warm-up (a third of the run, at least 20 s) it fits a
 * line to heapUsed + arrayBuffers and prints the slope with an ASCII chart. Verdict PASS when:
 *   - the fitted line of heapUsed + arrayBuffers rises ≤ 1 MB per 10 minutes over the run, plus, for
 *     runs shorter than 10 minutes, an allowance for JIT growth and sampling noise a short run cannot
 *     average out: 5 MB × (10 − minutes) / 9. So 10 minutes: ≤ 1 MB; 1 minute: ≤ 5.1 MB over the
 *     minute, which still catches a leak of ~1.5 KB per stream at the 1-minute test's ~3,400 streams;
 *   - no item arrived out of order or altered, no stream failed by a defect, and at most 2 % failed by design;
 *   - once the load stops, every node's live slots and binds return to 0.
 * The last line is `SOAK_RESULT {json}`. Exit status 0 on PASS, 1 on FAIL.
 * Run it with `--expose-gc` (npm run soak does), else the heap figures include garbage.
 */
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises';
import { mkdirSync } from 'node:fs';
import v8 from 'node:v8';
import { WebSocket } from 'ws';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { createNode } from '../../src/index.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { closeProxies, tcpProxy } from '../support/tcp-proxy.ts';
import { mulberry32Unit } from '../wire/helpers.ts';

function arg(name: string, d: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return d;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}

const MINUTES = arg('minutes', 10);
const SEED = arg('seed', 1) >>> 0;
const CONCURRENCY = Math.floor(arg('concurrency', 16));
const SAMPLE_S = arg('sample-s', MINUTES <= 2 ? 4 : 10);
const CUT_S = arg('cut-s', 15);
const DURATION_MS = MINUTES * 60_000;
const WARMUP_MS = Math.max(20_000, DURATION_MS / 3);
// Flat: the fitted line rises ≤ 1 MB per 10 minutes. A shorter run cannot average out JIT growth and
// sampling noise (~1–2 MB), so it also gets a 5 MB allowance that shrinks to 0 at 10 minutes.
const FLAT_BYTES = 1_000_000 * (MINUTES / 10) + 5_000_000 * Math.max(0, (10 - MINUTES) / 9);
const rand = mulberry32Unit(SEED);
const gc = (globalThis as { gc?: () => void }).gc;

const log = (s: string) => process.stdout.write(`${s}\n`);

// ───────────── the nodes ─────────────

const RESUME = !process.argv.includes('--no-resume');
// A finished stream keeps its replay ring for the resume window (a late resume can still be answered).
// Samples are taken at quiet points, after every stream ended and one window passed, so they see what
// is retained; a short window (the producers re-dial within 50 ms) keeps those pauses short.
const WINDOW_MS = Math.floor(arg('resume-window-ms', MINUTES <= 2 ? 1_000 : 2_000));
const resume = RESUME ? { windowMs: WINDOW_MS } : false;
const wsServer = webSocketServerTransport({ host: '127.0.0.1', port: 0 });
const consumer = await createNode({
  transports: [tcpTransport({ host: '127.0.0.1', port: 0 }), wsServer],
  resume,
});
const tcpAddr = consumer.addresses.find((a) => a.startsWith('tcp://'))!;
const wsAddr = consumer.addresses.find((a) => a.startsWith('ws://'))!;
type Via = 'tcp' | 'ws';
/** Per link: when it was last cut and when the proxy next saw the producer dial in (ms since start; -1: never). */
const links: Record<Via, { cutAt: number; backAt: number }> = {
  tcp: { cutAt: -1, backAt: -1 },
  ws: { cutAt: -1, backAt: -1 },
};
const tStart = performance.now();
const now = () => performance.now() - tStart;
const VERBOSE = process.argv.includes('--verbose');
const relinked = (via: Via) => () => {
  const l = links[via];
  if (l.cutAt >= 0 && l.backAt < l.cutAt) {
    l.backAt = now();
    if (VERBOSE)
      log(`  relink ${via} t=${(l.backAt / 1000).toFixed(3)}s, ${(l.backAt - l.cutAt).toFixed(0)} ms after its cut`);
  }
};
const tcpLink = await tcpProxy(Number(new URL(tcpAddr.replace('tcp://', 'http://')).port), relinked('tcp'));
const wsLink = await tcpProxy(Number(new URL(wsAddr.replace('ws://', 'http://')).port), relinked('ws'));
const wsProxyPort = new URL(wsLink.address.replace('tcp://', 'http://')).port;
const wsPath = new URL(wsAddr.replace('ws://', 'http://')).pathname;

const pTcp = await createNode({ transports: [tcpTransport({ listen: false })], resume });
// The WebSocket client re-dials by itself (its back-off, not the connect's reconnect policy): as fast as TCP's.
const pWs = await createNode({
  transports: [
    webSocketClientTransport({ WebSocket: WebSocket as never, minReconnectionDelay: 50, reconnectionJitter: 20 }),
  ],
  resume,
});
const reconnect = { reconnect: { initialDelayMs: 50, jitterMs: 20 } };
await pTcp.connect(tcpLink.address, reconnect);
await pWs.connect(`ws://127.0.0.1:${wsProxyPort}${wsPath}`, reconnect);
const nodes: LanemuxNode[] = [consumer, pTcp, pWs];

// ───────────── the load ─────────────

const stats = { opened: 0, done: 0, failed: 0, byDesign: 0, defects: 0, items: 0, large: 0, cuts: 0, mismatches: 0 };
/** Failed streams by their errors (`where code/reason`, …), and whether by design. */
const failures = new Map<string, number>();
let firstMismatch = '';

/** One stream's errors, recorded where they surface (attach, send, read) and judged once it ends. */
interface Outcome {
  readonly via: Via;
  readonly handle: string;
  readonly items: number;
  readonly openedAt: number;
  sent: number;
  readonly errors: Array<{ where: string; at: number; error: unknown }>;
}

const describe = (e: unknown): string => {
  const err = e as { code?: string; reason?: string; message?: string; cause?: { code?: string; message?: string } };
  const cause = err?.cause;
  return `${err?.code ?? '?'}${err?.reason ? `/${err.reason}` : ''} "${err?.message ?? String(e)}"${cause ? ` (cause ${cause.code ?? ''} "${cause.message ?? ''}")` : ''}`;
};
const keyOf = (where: string, e: unknown): string => {
  const err = e as { code?: string; reason?: string };
  const code = err?.code ?? (e instanceof Error ? e.message.slice(0, 60) : String(e));
  return `${where} ${code}${err?.reason ? `/${err.reason}` : ''}`;
};

/**
 * By design: resume is off, or the stream ran out its resume window because its link was down
 * longer than the window (no new connection reached the proxy within it of the cut).
 */
function byDesign(o: Outcome): boolean {
  if (!RESUME) return true;
  const l = links[o.via];
  return o.errors.every(({ error, at }) => {
    if ((error as { reason?: string })?.reason !== 'window' || l.cutAt < 0) return false;
    const down = l.backAt >= l.cutAt ? l.backAt - l.cutAt : at - l.cutAt;
    return down >= WINDOW_MS;
  });
}

function judge(o: Outcome): void {
  if (o.errors.length === 0) return;
  stats.failed++;
  const legit = byDesign(o);
  if (legit) stats.byDesign++;
  else stats.defects++;
  const key = `${legit ? 'by design' : 'DEFECT'}: ${[...new Set(o.errors.map((x) => keyOf(x.where, x.error)))].join(' + ')}`;
  failures.set(key, (failures.get(key) ?? 0) + 1);
  if (!VERBOSE) return;
  const l = links[o.via];
  const s = (ms: number) => `${(ms / 1000).toFixed(3)}s`;
  log(
    `  ${legit ? 'failed (by design)' : 'DEFECT'} ${o.handle} via ${o.via}, opened t=${s(o.openedAt)}, ${o.sent}/${o.items} sent; last ${o.via} cut t=${l.cutAt < 0 ? '-' : s(l.cutAt)}, re-link t=${l.backAt < l.cutAt ? '-' : s(l.backAt)}`,
  );
  for (const x of o.errors) log(`      ${x.where} t=${s(x.at)}: ${describe(x.error)}`);
}

const TOKEN = 'tok-'.repeat(12);
const largeBody = (i: number, n: number): Uint8Array => {
  const b = new Uint8Array(n);
  b[0] = i >>> 8;
  b[1] = i & 0xff;
  b[n - 1] = 0x5a;
  return b;
};

/** Streams whose attach failed: their anchor was cancelled, so their reader expects nothing. */
const unattached = new WeakSet<object>();

async function read(anchor: AsyncIterable<unknown>, expect: number, slowMs: number, stallMs: number): Promise<void> {
  if (stallMs > 0) await sleep(stallMs);
  let n = 0;
  for await (const v of anchor) {
    const i =
      typeof v === 'string' ? Number(v.slice(0, v.indexOf(':'))) : v instanceof Uint8Array ? (v[0]! << 8) | v[1]! : -1;
    if (i !== n || (v instanceof Uint8Array && v[v.length - 1] !== 0x5a)) {
      stats.mismatches++;
      firstMismatch ||= `item ${n} arrived as ${String(v).slice(0, 40)}`;
    }
    n++;
    if (slowMs > 0) await sleep(slowMs);
  }
  if (n !== expect && !unattached.has(anchor)) {
    stats.mismatches++;
    firstMismatch ||= `stream ended after ${n} of ${expect} items`;
  }
}

async function oneStream(producer: LanemuxNode): Promise<void> {
  const items = 1 + Math.floor(rand() * 40);
  const largeAt = rand() < 0.02 ? Math.floor(rand() * items) : -1;
  const r = rand();
  const slowMs = r < 0.2 ? 1 + Math.floor(rand() * 5) : 0;
  const stallMs = r > 0.95 ? 500 + Math.floor(rand() * 1500) : 0;
  const anchor = consumer.createAnchor<unknown>();
  stats.opened++;
  const o: Outcome = {
    via: producer === pTcp ? 'tcp' : 'ws',
    handle: anchor.handle,
    items,
    openedAt: now(),
    sent: 0,
    errors: [],
  };
  const fail = (where: string, error: unknown) => o.errors.push({ where, at: now(), error });
  const reading = read(anchor, items, slowMs, stallMs).catch((e) => fail('read', e));
  let sender: Awaited<ReturnType<LanemuxNode['attachAnchor']>>;
  try {
    sender = await producer.attachAnchor(anchor.handle, { timeoutMs: 20_000 });
  } catch (e) {
    fail('attach', e);
    unattached.add(anchor);
    anchor.cancel();
    await reading;
    judge(o);
    return;
  }
  try {
    for (let i = 0; i < items; i++) {
      if (i === largeAt) {
        stats.large++;
        await sender.send(largeBody(i, 65_536 + Math.floor(rand() * 131_072)));
      } else await sender.send(`${i}:${TOKEN}`);
      stats.items++;
      o.sent++;
    }
    await sender.finalize();
  } catch (e) {
    fail('send', e);
  }
  await reading;
  judge(o);
  stats.done++;
}

let stopping = false;
let paused = false;
let active = 0;
async function lane(producer: LanemuxNode): Promise<void> {
  while (!stopping) {
    if (paused) {
      await sleep(20);
      continue;
    }
    active++;
    await oneStream(producer);
    active--;
  }
}

/** Pause the load until every stream ended and one resume window passed, then sample. */
async function quietSample(t0: number): Promise<Sample> {
  paused = true;
  const until = performance.now() + 15_000;
  while ((active > 0 || live('live_slots') > 0) && performance.now() < until) await sleep(20);
  if (RESUME) await sleep(WINDOW_MS + 250);
  const s = await sample(t0);
  paused = false;
  return s;
}

// ───────────── sampling ─────────────

interface Sample {
  t: number;
  rss: number;
  heap: number;
  ab: number;
  slots: number;
  binds: number;
  done: number;
  /** Used bytes of each V8 heap space (old, code, …), to tell data from JIT code. */
  spaces: Record<string, number>;
}
const samples: Sample[] = [];
const gauge = (n: LanemuxNode, key: string) => n.metrics()[`velo_streaming_mux_${key}`] ?? 0;
const live = (key: string) => nodes.reduce((s, n) => s + gauge(n, key), 0);

/**
 * Full GCs with a turn of the event loop between them (weak callbacks and finalizers run, and what
 * they free goes in the next one), so a sample sees what is retained, not what awaits collection.
 */
async function collect(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc?.();
    await tick();
  }
  gc?.();
}

async function sample(t0: number): Promise<Sample> {
  await collect();
  const m = process.memoryUsage();
  const spaces: Record<string, number> = {};
  for (const sp of v8.getHeapSpaceStatistics()) spaces[sp.space_name.replace(/_space$/, '')] = sp.space_used_size;
  const s = {
    t: (performance.now() - t0) / 1000,
    rss: m.rss,
    heap: m.heapUsed,
    ab: m.arrayBuffers,
    slots: live('live_slots'),
    binds: live('live_binds'),
    done: stats.done,
    spaces,
  };
  samples.push(s);
  return s;
}

const MB = (b: number) => (b / 1e6).toFixed(1);
const MB2 = (b: number) => (b / 1e6).toFixed(2);

/** Least-squares slope of `y` over `t` (bytes per second). */
function slope(xs: Sample[], y: (s: Sample) => number): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mt = xs.reduce((a, s) => a + s.t, 0) / n;
  const my = xs.reduce((a, s) => a + y(s), 0) / n;
  let num = 0;
  let den = 0;
  for (const s of xs) {
    num += (s.t - mt) * (y(s) - my);
    den += (s.t - mt) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

function chart(xs: Sample[], y: (s: Sample) => number, label: string): string {
  const H = 8;
  const W = Math.min(60, xs.length);
  const cols = Array.from({ length: W }, (_, c) => y(xs[Math.floor((c * xs.length) / W)]!));
  const lo = Math.min(...cols);
  const hi = Math.max(...cols);
  const span = Math.max(hi - lo, 1);
  const rows: string[] = [];
  for (let r = H - 1; r >= 0; r--) {
    const edge = lo + (span * r) / (H - 1);
    const line = cols.map((v) => (Math.round(((v - lo) / span) * (H - 1)) === r ? '*' : ' ')).join('');
    rows.push(`${MB(edge).padStart(7)} MB |${line}`);
  }
  rows.push(`${' '.repeat(11)}+${'-'.repeat(W)}  ${label}, ${xs[0]!.t.toFixed(0)}–${xs.at(-1)!.t.toFixed(0)} s`);
  return rows.join('\n');
}

// ───────────── the run ─────────────

/** `--heap-snapshots`: one heap snapshot at the first quiet sample after the warm-up, one at the end, in .scratch/. */
const SNAPSHOTS = process.argv.includes('--heap-snapshots');
let snapshotA = '';
function snapshot(tag: string): string {
  mkdirSync('.scratch', { recursive: true });
  return v8.writeHeapSnapshot(`.scratch/soak-${process.pid}-${tag}.heapsnapshot`);
}

log(
  `soak: ${MINUTES} min, seed ${SEED}, ${CONCURRENCY} streams per producer (TCP + WebSocket), a cut every ${CUT_S} s, resume ${RESUME ? `on (window ${WINDOW_MS} ms)` : 'off'}, samples every ${SAMPLE_S} s${gc ? '' : ' (no --expose-gc: heap figures include garbage)'}`,
);
const t0 = performance.now();
const lanes = [
  ...Array.from({ length: CONCURRENCY }, () => lane(pTcp)),
  ...Array.from({ length: CONCURRENCY }, () => lane(pWs)),
];
let nextCut = CUT_S * 1000;
let nextSample = 0;
let nextPeek = 0;
let peakSlots = 0;
let peakBinds = 0;
log(
  `${'t s'.padStart(6)} ${'rss MB'.padStart(8)} ${'heap MB'.padStart(8)} ${'ab MB'.padStart(7)} ${'slots'.padStart(6)} ${'binds'.padStart(6)} ${'streams'.padStart(8)}`,
);
while (performance.now() - t0 < DURATION_MS) {
  const el = performance.now() - t0;
  if (el >= nextSample) {
    const s = await quietSample(t0);
    if (SNAPSHOTS && snapshotA === '' && s.t * 1000 >= WARMUP_MS) snapshotA = snapshot('a');
    log(
      `${s.t.toFixed(0).padStart(6)} ${MB(s.rss).padStart(8)} ${MB(s.heap).padStart(8)} ${MB(s.ab).padStart(7)} ${String(s.slots).padStart(6)} ${String(s.binds).padStart(6)} ${String(s.done).padStart(8)}`,
    );
    nextSample += SAMPLE_S * 1000;
  }
  if (el >= nextPeek) {
    peakSlots = Math.max(peakSlots, live('live_slots'));
    peakBinds = Math.max(peakBinds, live('live_binds'));
    nextPeek += 1000;
  }
  if (el >= nextCut) {
    const via: Via = stats.cuts % 2 === 0 ? 'tcp' : 'ws';
    links[via].cutAt = now();
    (via === 'tcp' ? tcpLink : wsLink).cut();
    if (VERBOSE) log(`  cut ${via} t=${(links[via].cutAt / 1000).toFixed(3)}s`);
    stats.cuts++;
    nextCut += CUT_S * 1000 * (0.5 + rand());
  }
  await sleep(100);
}
if (SNAPSHOTS) {
  // One more quiet sample, so the second snapshot sees retained memory as the first did.
  await quietSample(t0);
  log(`heap snapshots (compare them in DevTools' Memory tab): ${snapshotA || '-'} ${snapshot('b')}`);
}
stopping = true;
const settled = await Promise.race([Promise.all(lanes).then(() => true), sleep(60_000).then(() => false)]);
// Drained: every slot and bind of every node gone (binds of cancelled attaches wait out their deadline).
let drainedAt = -1;
for (let i = 0; i < 300; i++) {
  if (live('live_slots') === 0 && live('live_binds') === 0) {
    drainedAt = i * 100;
    break;
  }
  await sleep(100);
}
const leftSlots = live('live_slots');
const leftBinds = live('live_binds');

// ───────────── the verdict ─────────────

const after = samples.filter((s) => s.t * 1000 >= WARMUP_MS);
const mem = (s: Sample) => s.heap + s.ab;
const perRun = (bps: number) => bps * MINUTES * 60;
const memRise = perRun(slope(after, mem));
const heapRise = perRun(slope(after, (s) => s.heap));
const abRise = perRun(slope(after, (s) => s.ab));
const rssRise = perRun(slope(after, (s) => s.rss));
const per10 = (rise: number) => (rise / MINUTES) * 10;
log(`\n${chart(after, mem, 'heapUsed + arrayBuffers after GC')}`);
log(`\n${chart(after, (s) => s.rss, 'RSS')}`);
const maxSlots = peakSlots;
const maxBinds = peakBinds;
log(
  `\nafter warm-up (${(WARMUP_MS / 1000).toFixed(0)} s, ${after.length} samples): heapUsed+arrayBuffers ${MB2(memRise)} MB over the run (${MB2(per10(memRise))} MB / 10 min; heap ${MB(per10(heapRise))}, arrayBuffers ${MB(per10(abRise))}); RSS ${MB(per10(rssRise))} MB / 10 min`,
);
const spaceNames = Object.keys(after[0]?.spaces ?? {});
const bySpace = spaceNames
  .map((n) => [n, per10(perRun(slope(after, (s) => s.spaces[n] ?? 0)))] as const)
  .filter(([, v]) => Math.abs(v) >= 10_000)
  .map(([n, v]) => `${n} ${MB2(v)}`)
  .join(', ');
log(`heap used by space, MB / 10 min after warm-up: ${bySpace || 'all within ±0.01'}`);
log(
  `streams ${stats.done} done of ${stats.opened} opened (${Math.round((stats.done / DURATION_MS) * 60_000)} / min), ${stats.items} items, ${stats.large} large records, ${stats.cuts} cuts, ${stats.failed} failed (${stats.defects} by a defect, ${stats.byDesign} by design)${failures.size ? `: ${[...failures].map(([k, v]) => `${k}: ${v}`).join(', ')}` : ''}, ${stats.mismatches} out of order${firstMismatch ? ` (${firstMismatch})` : ''}`,
);
log(
  `live slots peak ${maxSlots}, binds peak ${maxBinds} (under load); at the quiet samples after warm-up at most ${Math.max(0, ...after.map((s) => s.slots))} slots, ${Math.max(0, ...after.map((s) => s.binds))} binds; after the load: ${leftSlots} slots, ${leftBinds} binds${drainedAt >= 0 ? ` (drained in ${drainedAt} ms)` : ''}${settled ? '' : '; streams still running 60 s after the end'}`,
);
const problems: string[] = [];
if (after.length < 3) problems.push('too few samples after the warm-up');
if (memRise > FLAT_BYTES) problems.push(`memory rose ${MB2(memRise)} MB over the run (bound ${MB2(FLAT_BYTES)} MB)`);
if (stats.mismatches > 0) problems.push(`${stats.mismatches} streams out of order or short`);
if (stats.defects > 0) problems.push(`${stats.defects} streams failed by a defect`);
if (stats.byDesign > stats.opened * 0.02)
  problems.push(`${stats.byDesign} of ${stats.opened} streams failed by design`);
if (leftSlots !== 0 || leftBinds !== 0) problems.push(`${leftSlots} slots and ${leftBinds} binds left after the load`);
if (!settled) problems.push('streams did not finish after the load stopped');
const verdict = problems.length === 0 ? 'PASS' : 'FAIL';
log(`soak: ${verdict}${problems.length ? ` (${problems.join('; ')})` : ''}`);
log(
  `SOAK_RESULT ${JSON.stringify({
    verdict,
    problems,
    minutes: MINUTES,
    seed: SEED,
    streams: stats.done,
    failed: stats.failed,
    failed_defects: stats.defects,
    failed_by_design: stats.byDesign,
    mismatches: stats.mismatches,
    cuts: stats.cuts,
    mem_rise_mb_per_10min: Number(MB2(per10(memRise))),
    rss_rise_mb_per_10min: Number(MB(per10(rssRise))),
    peak_slots: maxSlots,
    peak_binds: maxBinds,
  })}`,
);
for (const n of nodes) await n.close();
await closeProxies();
process.exit(verdict === 'PASS' ? 0 : 1);
