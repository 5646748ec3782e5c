#!/usr/bin/env node
// Transport + messenger micro-benchmark: 64-byte fire-and-forget messages/s, fire-and-forget echo
// round trip and unary round trip (p50/p99), over memory, TCP (1 and 8 lanes) and WebSocket
// (ws server + partysocket client). Sender and receiver run in separate processes except for memory.
//
// Usage (from the repository root):
//   npx tsc -p tsconfig.build.json && node bench/transport-bench.mjs
//   node bench/transport-bench.mjs --adapters tcp1,ws --messages 500000 --rtts 5000
//
// Imports the compiled output in dist/ (Node 20 cannot run the .ts sources).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.LANEMUX_DIST ?? join(root, 'dist');
const { createMessenger } = await import(join(dist, 'messenger', 'messenger.js'));
const { tcpTransport } = await import(join(dist, 'adapters', 'node-tcp.js'));
const { webSocketServerTransport } = await import(join(dist, 'adapters', 'ws-server.js'));
const { webSocketClientTransport } = await import(join(dist, 'adapters', 'websocket.js'));
const { memoryTransport, createMemoryNetwork } = await import(join(dist, 'adapters', 'memory.js'));
const { default: WebSocket } = await import('ws');

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .flatMap((a, i, all) =>
      a.startsWith('--') ? [[a.slice(2), all[i + 1]?.startsWith('--') ? 'true' : (all[i + 1] ?? 'true')]] : [],
    ),
);
const ADAPTERS = {
  memory: { lanes: 1 },
  tcp1: { lanes: 1 },
  tcp8: { lanes: 8 },
  ws: { lanes: 1 },
};
const PAYLOAD = 64;

function serverTransports(kind) {
  if (kind === 'memory') return [memoryTransport({ network: sharedNetwork, name: 'bench' })];
  if (kind === 'ws') return [webSocketServerTransport({ port: 0 })];
  return [tcpTransport({ port: 0 })];
}

function clientTransports(kind) {
  if (kind === 'memory') return [memoryTransport({ network: sharedNetwork, listen: false })];
  if (kind === 'ws') return [webSocketClientTransport({ WebSocket })];
  return [tcpTransport({ listen: false })];
}

let sharedNetwork;

/** The receiving side: counts 'tok', echoes 'ping', answers 'rpc'. */
async function serve(kind) {
  const m = await createMessenger({
    transports: serverTransports(kind),
    lanes: ADAPTERS[kind].lanes,
    healthCheck: false,
  });
  let expected = 0;
  let count = 0;
  let from;
  m.on('tok', (peer) => {
    if (++count === expected) {
      const a = m.send(peer, 0, 'done', new Uint8Array(1));
      if (a !== true) a.catch(() => {});
    }
    from = peer;
  });
  m.on('ping', (peer, lane, payload) => {
    const a = m.send(peer, lane, 'pong', payload);
    if (a !== true) a.catch(() => {});
  });
  m.handle('expect', (_peer, body) => {
    expected = body.n;
    count = 0;
    return process.cpuUsage();
  });
  m.handle('cpu', () => process.cpuUsage());
  m.handle('rpc', (_peer, body) => body);
  void from;
  return m;
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function run(kind, messages, rtts) {
  let child;
  let server;
  let address;
  if (kind === 'memory') {
    sharedNetwork = createMemoryNetwork();
    server = await serve(kind);
    address = server.addresses[0];
  } else {
    child = fork(fileURLToPath(import.meta.url), ['--serve', kind], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    address = await new Promise((resolve, reject) => {
      child.once('message', (msg) => resolve(msg.address));
      child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
    });
  }
  const client = await createMessenger({
    transports: clientTransports(kind),
    lanes: ADAPTERS[kind].lanes,
    healthCheck: false,
  });
  let onDone;
  client.on('done', () => onDone?.());
  let onPong;
  client.on('pong', () => onPong?.());
  const peer = await client.connect(address);
  const lanes = peer.lanes;
  const payload = new Uint8Array(PAYLOAD).fill(7);

  async function throughput(n) {
    const serverCpu0 = await client.request(peer.id, 'expect', { n });
    const done = new Promise((r) => (onDone = r));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const a = client.send(peer.id, i % lanes, 'tok', payload);
      if (a !== true) await a;
    }
    await done;
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const serverCpu1 = await client.request(peer.id, 'cpu', null);
    const serverUs = serverCpu1.user - serverCpu0.user + serverCpu1.system - serverCpu0.system;
    return { rate: n / (ms / 1000), cpuUsPerMsg: (cpu.user + cpu.system + (kind === 'memory' ? 0 : serverUs)) / n };
  }

  async function echoRtt(n) {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const got = new Promise((r) => (onPong = r));
      const t0 = performance.now();
      const a = client.send(peer.id, 0, 'ping', payload);
      if (a !== true) await a;
      await got;
      out[i] = performance.now() - t0;
    }
    return out.sort();
  }

  async function unaryRtt(n) {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await client.request(peer.id, 'rpc', payload);
      out[i] = performance.now() - t0;
    }
    return out.sort();
  }

  // Warm-up (JIT, socket buffers), then measure.
  await throughput(Math.min(messages, 50_000));
  await echoRtt(Math.min(rtts, 500));
  await unaryRtt(Math.min(rtts, 500));
  const tp = await throughput(messages);
  const echo = await echoRtt(rtts);
  const unary = await unaryRtt(rtts);

  await client.close();
  if (server !== undefined) await server.close();
  if (child !== undefined) {
    child.send('exit');
    await new Promise((r) => child.once('exit', r));
  }
  return {
    adapter:
      kind === 'tcp1'
        ? 'tcp, 1 lane'
        : kind === 'tcp8'
          ? 'tcp, 8 lanes'
          : kind === 'ws'
            ? 'ws + partysocket'
            : 'memory',
    'msgs/s': Math.round(tp.rate).toLocaleString('en-US'),
    'CPU µs/msg': tp.cpuUsPerMsg.toFixed(2),
    'f&f echo p50 ms': pct(echo, 50).toFixed(3),
    'f&f echo p99 ms': pct(echo, 99).toFixed(3),
    'unary p50 ms': pct(unary, 50).toFixed(3),
    'unary p99 ms': pct(unary, 99).toFixed(3),
  };
}

if (args.serve !== undefined) {
  const m = await serve(args.serve);
  process.send({ address: m.addresses[0] });
  process.on('message', async (msg) => {
    if (msg === 'exit') {
      await m.close();
      process.exit(0);
    }
  });
} else {
  const kinds = (args.adapters ?? 'memory,tcp1,tcp8,ws').split(',');
  const messages = Number(args.messages ?? 300_000);
  const rtts = Number(args.rtts ?? 3_000);
  console.log(
    `lanemux transport bench: ${PAYLOAD}-byte fire-and-forget x ${messages}, ${rtts} sequential round trips, Node ${process.version}`,
  );
  const rows = [];
  for (const kind of kinds) rows.push(await run(kind, messages, rtts));
  console.table(rows);
}
