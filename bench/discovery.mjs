#!/usr/bin/env node
// Resolve latency of the discovery adapters against real servers: Debian's etcd (binary `etcd`) and
// nats-server with JetStream, each started here on free loopback ports with its data under the
// checkout's `.scratch/`, plus the in-memory static store as the floor.
//
// Per adapter: `--workers` clients register one worker each, then one reader resolves a random
// registered worker `--resolves` times in a row (after `--warm` unmeasured ones), each timed alone.
// Also timed: register → the put seen by a watch of another client (`--watch` samples), and the first
// attach by handle of a node with no link to the anchor's worker (`--attaches` samples): an engine node
// registers on loopback TCP through `createNode({ discovery })`; each sample is a fresh frontend node
// (dialling only, sharing one warm discovery client) whose `attachAnchor(handle)` resolves the worker,
// dials it and attaches; the same frontend's second attach, over the link it made, is timed beside it.
//
// Usage (after `npm run build`, or with LANEMUX_DIST pointing at another build):
//   node bench/discovery.mjs [--resolves 1000] [--warm 200] [--workers 16] [--watch 50] [--attaches 50]
//                            [--only etcd,nats,static]
// Prints one JSON line per adapter (ms: p50, p99, mean, max) and a table.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { dist, parseArgs, pct, repoRoot, round } from './harness.mjs';

const args = parseArgs();
const RESOLVES = Number(args.resolves ?? 1000);
const WARM = Number(args.warm ?? 200);
const WORKERS = Number(args.workers ?? 16);
const WATCH = Number(args.watch ?? 50);
const ATTACHES = Number(args.attaches ?? 50);
const only = (args.only ?? 'static,etcd,nats').split(',');

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Start `binary` and resolve once its log matches `ready`; returns a stop function. */
function startServer(binary, argv, ready) {
  const child = spawn(binary, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${binary} not ready in 30 s:\n${log.slice(-4000)}`)), 30_000);
    const onData = (c) => {
      log += c;
      if (ready.test(log)) {
        clearTimeout(timer);
        resolve(async () => {
          child.kill('SIGTERM');
          await new Promise((r) => child.once('exit', r));
        });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', (e) =>
      reject(new Error(`${binary}: ${e.message} (install Debian's etcd-server / nats-server)`)),
    );
    child.once('exit', (code) => reject(new Error(`${binary} exited (${code}):\n${log.slice(-4000)}`)));
  });
}

function scratch(prefix) {
  const base = join(repoRoot, '.scratch');
  mkdirSync(base, { recursive: true });
  return mkdtempSync(join(base, prefix));
}

const hex = (i) => (0xd15c0000n + BigInt(i)).toString(16).padStart(16, '0');

function summary(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return {
    p50: round(pct(s, 50)),
    p99: round(pct(s, 99)),
    mean: round(s.reduce((a, b) => a + b, 0) / s.length),
    max: round(s[s.length - 1]),
    n: s.length,
  };
}

async function measure(name, make) {
  const writers = [];
  for (let i = 0; i < WORKERS; i++) {
    const d = make();
    writers.push(d);
    await d.register({
      workerId: hex(i),
      addresses: { tcp: `tcp://10.0.0.${i}:7000` },
      lanes: 4,
      metadata: { i: `${i}` },
    });
  }
  const reader = make();
  for (let i = 0; i < WARM; i++) await reader.resolve(hex(i % WORKERS));
  const times = [];
  for (let i = 0; i < RESOLVES; i++) {
    const id = hex(Math.floor(Math.random() * WORKERS));
    const t = performance.now();
    const r = await reader.resolve(id);
    times.push(performance.now() - t);
    if (r === undefined) throw new Error(`${name}: ${id} did not resolve`);
  }
  // Register → the put seen by another client's watch.
  const watch = reader.watch();
  for (;;) if ((await watch.next()).value?.type === 'synced') break;
  const extra = make();
  const watchTimes = [];
  for (let i = 0; i < WATCH; i++) {
    const t = performance.now();
    await extra.register({
      workerId: hex(WORKERS),
      addresses: { tcp: 'tcp://10.0.0.99:7000' },
      metadata: { n: `${i}` },
    });
    for (;;) {
      const e = (await watch.next()).value;
      if (e?.type === 'put' && e.registration.metadata.n === `${i}`) break;
    }
    watchTimes.push(performance.now() - t);
  }
  watch.close();
  await Promise.all([...writers, reader, extra].map((d) => d.close()));
  const attach = await attachLatency(make);
  return {
    adapter: name,
    resolveMs: summary(times),
    registerToWatchMs: summary(watchTimes),
    firstAttachMs: summary(attach.first),
    linkedAttachMs: summary(attach.linked),
    workers: WORKERS,
  };
}

/** `attachAnchor(handle)` of a frontend with no link (resolve + dial + attach), and then over its link. */
async function attachLatency(make) {
  const { createNode } = await dist('index.js');
  const { tcpTransport } = await dist('adapters/node-tcp.js');
  const engine = await createNode({ transports: [tcpTransport({ port: 0 })], discovery: make() });
  const shared = make();
  const first = [];
  const linked = [];
  for (let i = 0; i < ATTACHES + 5; i++) {
    const frontend = await createNode({ transports: [tcpTransport({ listen: false })], discovery: shared });
    const timed = [];
    for (let k = 0; k < 2; k++) {
      const anchor = engine.createAnchor();
      const t = performance.now();
      const sender = await frontend.attachAnchor(anchor.handle);
      timed.push(performance.now() - t);
      await sender.finalize();
      for await (const _ of anchor);
    }
    // The first five warm the code paths up.
    if (i >= 5) {
      first.push(timed[0]);
      linked.push(timed[1]);
    }
    await frontend.close();
  }
  await engine.close();
  await shared.close();
  return { first, linked };
}

const results = [];
const cleanup = [];
try {
  if (only.includes('static')) {
    const { createStaticStore, staticDiscovery } = await dist('discovery/static.js');
    const store = createStaticStore();
    results.push(await measure('static', () => staticDiscovery({ store })));
  }
  if (only.includes('etcd')) {
    const { etcdDiscovery } = await dist('discovery/etcd.js');
    const dir = scratch('bench-etcd-');
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const [client, peer] = [await freePort(), await freePort()];
    const c = `http://127.0.0.1:${client}`;
    const p = `http://127.0.0.1:${peer}`;
    const stop = await startServer(
      'etcd',
      [
        '--name',
        'bench',
        '--data-dir',
        dir,
        '--listen-client-urls',
        c,
        '--advertise-client-urls',
        c,
        '--listen-peer-urls',
        p,
        '--initial-advertise-peer-urls',
        p,
        '--initial-cluster',
        `bench=${p}`,
        '--logger',
        'zap',
        '--log-outputs',
        'stderr',
      ],
      /serving client traffic|ready to serve client requests/,
    );
    cleanup.unshift(stop);
    results.push(await measure('etcd', () => etcdDiscovery({ hosts: `127.0.0.1:${client}` })));
  }
  if (only.includes('nats')) {
    const { natsDiscovery } = await dist('discovery/nats.js');
    const dir = scratch('bench-nats-');
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const port = await freePort();
    const stop = await startServer(
      'nats-server',
      ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir],
      /Server is ready/,
    );
    cleanup.unshift(stop);
    results.push(await measure('nats', () => natsDiscovery({ servers: `nats://127.0.0.1:${port}` })));
  }
} finally {
  for (const f of cleanup) await f();
}

for (const r of results) process.stdout.write(`${JSON.stringify(r)}\n`);
process.stdout.write(
  `\n${'adapter'.padEnd(8)} ${'resolve p50'.padStart(12)} ${'p99'.padStart(8)} ${'mean'.padStart(8)}   register→watch p50 ${'p99'.padStart(8)}   first attach p50 ${'p99'.padStart(8)}   linked attach p50\n`,
);
for (const r of results)
  process.stdout.write(
    `${r.adapter.padEnd(8)} ${`${r.resolveMs.p50} ms`.padStart(12)} ${`${r.resolveMs.p99} ms`.padStart(8)} ${`${r.resolveMs.mean} ms`.padStart(8)}   ${`${r.registerToWatchMs.p50} ms`.padStart(18)} ${`${r.registerToWatchMs.p99} ms`.padStart(8)}   ${`${r.firstAttachMs.p50} ms`.padStart(16)} ${`${r.firstAttachMs.p99} ms`.padStart(8)}   ${`${r.linkedAttachMs.p50} ms`.padStart(17)}\n`,
  );
process.exit(0);
