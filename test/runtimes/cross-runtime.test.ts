// Cross-runtime pairs: this Node process, a Deno process and a Bun process stream tokens to each
// other through the mux (createAnchor / attachAnchor / sender.send), over TCP and over WebSocket,
// in both directions, and every stream arrives with exact content and order. The peers run
// peer-protocol.ts (deno/peer.ts, bun/peer.ts) and print a JSON ready line with their addresses.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { expectedStreams, exchange, startPeer, type Exchange, type Peer } from './peer-protocol.ts';
import { bunBinary, denoBinary } from '../support/runtime-binaries.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const COUNT = 16;
const TOKENS = 40;

interface Remote {
  readonly runtime: string;
  readonly tcp: string;
  readonly ws: string;
  readonly child: ChildProcess;
}

/** Spawn a peer and wait for its ready line (or fail with its stderr). */
function spawnPeer(cmd: string, args: string[]): Promise<Remote> {
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return new Promise<Remote>((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => fail(new Error(`${cmd} peer not ready within 20 s\n${err}`)), 20_000);
    const fail = (e: Error): void => {
      clearTimeout(timer);
      child.kill();
      reject(e);
    };
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => fail(new Error(`${cmd} peer exited (${code}) before it was ready\n${err}`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      const ready = JSON.parse(line) as { runtime: string; tcp: string; ws: string };
      resolve({ ...ready, child });
    });
  });
}

/** Close the peer's stdin (it exits by itself), or kill it after 5 s. */
function stopPeer(r: Remote | undefined): Promise<void> {
  if (r === undefined || r.child.exitCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const t = setTimeout(() => r.child.kill('SIGKILL'), 5_000);
    r.child.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
    r.child.stdin?.end();
  });
}

function expectExact(x: Exchange, listener: string, dialler: string): void {
  expect({ listener: x.listener, dialler: x.dialler }).toEqual({ listener, dialler });
  const want = expectedStreams(COUNT, TOKENS);
  expect(x.toListener).toEqual(want);
  expect(x.toDialler).toEqual(want);
}

describe('cross-runtime pairs: Node ↔ Deno ↔ Bun over TCP and WebSocket', () => {
  let deno: Remote | undefined;
  let bun: Remote | undefined;
  let local: Peer | undefined;
  const fresh: Peer[] = [];
  const nodeDialers = () => [
    tcpTransport({ listen: false }),
    webSocketClientTransport({ WebSocket: WebSocket as never }),
  ];

  beforeAll(async () => {
    // Keep each one as it starts and wait for all, so afterAll stops whatever did start if another fails.
    const started = await Promise.allSettled([
      Promise.resolve()
        .then(() =>
          spawnPeer(denoBinary(), [
            'run',
            '--cached-only',
            '--no-check',
            '--allow-net',
            '--allow-read',
            '--allow-env',
            'test/runtimes/deno/peer.ts',
          ]),
        )
        .then((r) => (deno = r)),
      Promise.resolve()
        .then(() => spawnPeer(bunBinary(), ['run', 'test/runtimes/bun/peer.ts']))
        .then((r) => (bun = r)),
      startPeer(
        [
          tcpTransport({ port: 0 }),
          webSocketServerTransport({ port: 0 }),
          webSocketClientTransport({ WebSocket: WebSocket as never }),
        ],
        nodeDialers,
      ).then((p) => (local = p)),
    ]);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
  }, 30_000);

  afterAll(async () => {
    await Promise.all(fresh.splice(0).map((p) => p.close()));
    await local?.close();
    await Promise.all([stopPeer(deno), stopPeer(bun)]);
  });

  /** This process dials `address` from a fresh node (a new worker) and exchanges streams. */
  async function fromNode(address: string): Promise<Exchange> {
    const self = await startPeer(nodeDialers());
    fresh.push(self);
    const id = await self.node.connect(address);
    return exchange(self, id, COUNT, TOKENS);
  }

  /** Ask `remote` (over a control link from this process) to dial `address` and exchange. */
  async function fromRemote(remote: Remote, address: string): Promise<Exchange> {
    const control = await local!.node.connect(remote.tcp);
    return (await local!.messenger.request(
      control,
      'pair',
      { address, count: COUNT, tokens: TOKENS },
      { timeoutMs: 20_000 },
    )) as Exchange;
  }

  it('the peers started in their own runtimes', () => {
    expect([deno?.runtime, bun?.runtime]).toEqual(['deno', 'bun']);
    for (const r of [deno, bun]) {
      expect(r?.tcp).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
      expect(r?.ws).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/lanemux$/);
    }
  });

  it('Node dials Deno over TCP (Deno.listen): both directions exact', async () => {
    expectExact(await fromNode(deno!.tcp), 'deno', 'node');
  });

  it('Node dials Deno over WebSocket (Deno.serve server, partysocket client on ws)', async () => {
    expectExact(await fromNode(deno!.ws), 'deno', 'node');
  });

  it('Node dials Bun over TCP (Bun.listen): both directions exact', async () => {
    expectExact(await fromNode(bun!.tcp), 'bun', 'node');
  });

  it('Node dials Bun over WebSocket (Bun.serve server)', async () => {
    expectExact(await fromNode(bun!.ws), 'bun', 'node');
  });

  it('Deno and Bun dial Node over TCP (node:net server) and WebSocket (ws server)', async () => {
    const [tcp, ws] = local!.node.addresses as [string, string];
    expectExact(await fromRemote(deno!, tcp), 'node', 'deno');
    expectExact(await fromRemote(deno!, ws), 'node', 'deno');
    expectExact(await fromRemote(bun!, tcp), 'node', 'bun');
    expectExact(await fromRemote(bun!, ws), 'node', 'bun');
  });

  it('Deno ↔ Bun over TCP, both ways round', async () => {
    expectExact(await fromRemote(deno!, bun!.tcp), 'bun', 'deno');
    expectExact(await fromRemote(bun!, deno!.tcp), 'deno', 'bun');
  });

  it('Deno ↔ Bun over WebSocket (Deno client → Bun server, Bun client → Deno server)', async () => {
    expectExact(await fromRemote(deno!, bun!.ws), 'bun', 'deno');
    expectExact(await fromRemote(bun!, deno!.ws), 'deno', 'bun');
  });
});
