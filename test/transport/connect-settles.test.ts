// Every connect settles, and a WebSocket dial that never reaches a lanemux server says why at once:
// refused, wrong path (HTTP 404), an HTTP server that does not upgrade, a WebSocket server that
// closes before answering the HELLO. Before, partysocket's synthetic close made the client retry
// forever on unref'd timers: connect waited out its 10 s deadline with one message for every case,
// and a Node process awaiting it exited with code 13 and no output.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { isLanemuxError } from '../../src/errors.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { CHECKOUT } from '../support/scratch.ts';

const nodes: LanemuxNode[] = [];
const servers: http.Server[] = [];

afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

async function client(): Promise<LanemuxNode> {
  const n = await createNode({ transports: [webSocketClientTransport({ WebSocket: WebSocket as never })] });
  nodes.push(n);
  return n;
}

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function httpServer(handler?: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as net.AddressInfo).port };
}

/** How `connect` settled, and how long it took. */
async function outcome(p: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const t0 = performance.now();
  try {
    await p;
    return { error: undefined, ms: performance.now() - t0 };
  } catch (error) {
    return { error, ms: performance.now() - t0 };
  }
}

/** Run `script` (ES module text importing the repo's .ts sources) in a fresh Node process. */
function runNode(
  script: string,
  timeoutMs = 20_000,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', join(CHECKOUT, 'test/support/ts-register.mjs'), '--input-type=module', '-e', script],
      { cwd: CHECKOUT },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child still running after ${timeoutMs} ms: ${stdout}${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

const src = (rel: string): string => JSON.stringify(join(CHECKOUT, 'src', rel));

describe('a WebSocket connect that reaches no lanemux server fails fast, saying why', () => {
  it('nothing listens: a retryable ERR_CONNECT saying the connection was refused, at once', async () => {
    const port = await closedPort();
    const { error, ms } = await outcome((await client()).connect(`ws://127.0.0.1:${port}/lanemux`));
    expect(isLanemuxError(error, 'ERR_CONNECT'), String(error)).toBe(true);
    expect((error as Error).message).toContain(`connection refused: nothing listens at 127.0.0.1:${port}`);
    expect((error as { retryable: boolean }).retryable).toBe(true);
    expect(ms).toBeLessThan(3_000);
  });

  it('a wrong path on a lanemux server: ERR_CONNECT naming HTTP 404 and the path, not retryable', async () => {
    const server = await createNode({ transports: [webSocketServerTransport({ port: 0 })] });
    nodes.push(server);
    const wrong = server.address.replace(/\/lanemux$/, '/nope');
    const { error, ms } = await outcome((await client()).connect(wrong));
    expect(isLanemuxError(error, 'ERR_CONNECT'), String(error)).toBe(true);
    expect((error as Error).message).toContain('HTTP 404');
    expect((error as Error).message).toContain('"/nope"');
    expect((error as { retryable: boolean }).retryable).toBe(false);
    expect(ms).toBeLessThan(3_000);
    // The right path on the same server still connects.
    await expect((await client()).connect(server.address)).resolves.toBeDefined();
  });

  it('an HTTP server that does not upgrade: ERR_CONNECT naming its status and saying it is not a lanemux endpoint', async () => {
    const { port } = await httpServer((_req, res) => res.end('hello'));
    const { error, ms } = await outcome((await client()).connect(`ws://127.0.0.1:${port}/lanemux`));
    expect(isLanemuxError(error, 'ERR_CONNECT'), String(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /answered HTTP 200 instead of upgrading to WebSocket: this is not a lanemux WebSocket endpoint/,
    );
    expect(ms).toBeLessThan(3_000);
  });

  it('a WebSocket server that closes before answering the HELLO: ERR_CONNECT with its close code, saying it is not a lanemux server', async () => {
    const { server, port } = await httpServer();
    const wss = new WebSocketServer({ server });
    wss.on('connection', (ws) => ws.close(1000, 'bye'));
    const { error, ms } = await outcome((await client()).connect(`ws://127.0.0.1:${port}/`));
    wss.close();
    expect(isLanemuxError(error, 'ERR_CONNECT'), String(error)).toBe(true);
    expect((error as Error).message).toContain(
      'closed it (1000: bye) before answering the HELLO: this is not a lanemux server',
    );
    expect(ms).toBeLessThan(3_000);
  });
});

describe('a Node process awaiting a connect sees it settle', () => {
  it('a refused connect rejects and the process exits 0 (it used to exit 13 with no output)', async () => {
    const port = await closedPort();
    const r = await runNode(`
      import WebSocket from 'ws';
      const { createNode } = await import(${src('stream/node.ts')});
      const { webSocketClientTransport } = await import(${src('adapters/websocket.ts')});
      const node = await createNode({ transports: [webSocketClientTransport({ WebSocket })] });
      try { await node.connect('ws://127.0.0.1:${port}/lanemux'); console.log('connected'); }
      catch (e) { console.log('rejected', e.code); }
      await node.close();
    `);
    expect(r.stdout.trim(), r.stderr).toBe('rejected ERR_CONNECT');
    expect(r.status).toBe(0);
  });

  it('a server that drops every socket without a close frame: connect rejects at its deadline and the process exits 0', async () => {
    // 1006 is no evidence against the server (an evicted handshake looks the same): the dial retries,
    // and its back-off timer must hold the process open for the connect that waits on it.
    const { server, port } = await httpServer();
    const wss = new WebSocketServer({ server });
    let dropped = 0;
    wss.on('connection', (ws) => {
      dropped++;
      ws.terminate();
    });
    const r = await runNode(`
      import WebSocket from 'ws';
      const { createMessenger } = await import(${src('messenger/messenger.ts')});
      const { webSocketClientTransport } = await import(${src('adapters/websocket.ts')});
      const m = await createMessenger({ transports: [webSocketClientTransport({ WebSocket, minReconnectionDelay: 300, reconnectionJitter: 0 })], healthCheck: false });
      try { await m.connect('ws://127.0.0.1:${port}/', { timeoutMs: 1_500 }); console.log('connected'); }
      catch (e) { console.log('rejected', e.code); }
      await m.close();
    `);
    wss.close();
    expect(r.stdout.trim(), r.stderr).toBe('rejected ERR_CONNECT');
    expect(r.status).toBe(0);
    expect(dropped).toBeGreaterThanOrEqual(2);
  });
});
