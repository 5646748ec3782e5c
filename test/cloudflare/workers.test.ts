/**
 * lanemux inside the real Workers runtime (workerd, through miniflare): the worker in ./worker.ts is
 * bundled as an application would bundle it, then Node clients stream from it over WebSocket — from
 * a plain Worker's `fetch` handler (one node per request), and through a Durable Object that holds
 * one engine link for all its clients and relays the engine's streams with end-to-end credit.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import WebSocket from 'ws';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { cloudflareWebSocketTransport } from '../../src/adapters/cloudflare-ws.ts';
import { createNode, type LanemuxNode } from '../../src/index.ts';
import { createMessenger, MESSENGER_MUX_KEY, type Messenger } from '../../src/messenger/index.ts';
import { scratchDir } from '../support/scratch.ts';

const ROOT = join(import.meta.dirname, '..', '..');
let dir: string;
let mf: Miniflare;
let base: string;
let engine: { node: LanemuxNode; messenger: Messenger };
const clients: Array<{ node: LanemuxNode; messenger: Messenger }> = [];

async function messengerNode(transports: Parameters<typeof createMessenger>[0]['transports']) {
  const messenger = await createMessenger({ transports, transportKeys: [MESSENGER_MUX_KEY] });
  return { node: await createNode({ messenger }), messenger };
}

/** A Node client (standing in for a browser) dialled to `path` on the worker. */
async function client(path: string): Promise<{ node: LanemuxNode; messenger: Messenger; peer: string }> {
  const c = await messengerNode([webSocketClientTransport({ WebSocket: WebSocket as never, maxRetries: 0 })]);
  clients.push(c);
  const peer = await c.node.connect(`${base.replace(/^http/, 'ws')}${path}`, { signal: AbortSignal.timeout(15_000) });
  return { ...c, peer };
}

async function readAll(anchor: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const t of anchor) out.push(t);
  return out;
}

const expected = (n: number): string[] =>
  Array.from({ length: n }, (_, i) => `${i}:${['alpha', 'beta', 'gamma', 'delta'][i % 4]}`);

beforeAll(async () => {
  dir = scratchDir('lanemux-workers-');
  // The application's bundle: workerd conditions, every dependency inlined; ES modules (zod's chunk, loaded only to
  // explain a refused option, sits beside the worker's, as a deployed Worker's bundler leaves it).
  await build({
    configFile: false,
    root: ROOT,
    logLevel: 'silent',
    resolve: { conditions: ['workerd', 'worker', 'browser', 'module', 'import', 'default'] },
    build: {
      outDir: dir,
      emptyOutDir: true,
      minify: false,
      target: 'es2022',
      lib: { entry: join(import.meta.dirname, 'worker.ts'), formats: ['es'], fileName: () => 'worker.js' },
    },
  });
  // The engine: a Node process's node behind the `ws` server, streaming n tokens into any anchor.
  engine = await messengerNode([webSocketServerTransport({ port: 0 })]);
  engine.messenger.handle('generate', async (_from, body) => {
    const { handle, n } = body as { handle: string; n: number };
    const sender = await engine.node.attachAnchor<string>(handle);
    for (let i = 0; i < n; i++) await sender.send(expected(i + 1)[i]!);
    await sender.finalize();
    return { sent: n };
  });
  mf = new Miniflare({
    modules: true,
    scriptPath: join(dir, 'worker.js'),
    modulesRoot: dir,
    modulesRules: [{ type: 'ESModule', include: ['**/*.js'] }],
    compatibilityDate: '2026-07-01',
    durableObjects: { HUB: 'Hub' },
    bindings: { ENGINE_URL: engine.node.address },
    host: '127.0.0.1',
    port: 0,
  });
  base = (await mf.ready).toString().replace(/\/$/, '');
}, 120_000);

afterAll(async () => {
  for (const c of clients) await c.node.close().then(() => c.messenger.close());
  await mf?.dispose();
  await engine?.node.close();
  await engine?.messenger.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('Cloudflare Workers (workerd)', () => {
  it("a Worker's fetch handler serves a lanemux node over WebSocketPair: 1,000 tokens exact and in order", async () => {
    const c = await client('/lanemux');
    const anchor = c.node.createAnchor<string>();
    const reading = readAll(anchor);
    const answer = (await c.messenger.request(c.peer, 'generate', { handle: anchor.handle, n: 1000 })) as {
      sent: number;
      runtime: string;
    };
    expect(answer).toEqual({ sent: 1000, runtime: 'function' });
    expect(await reading).toEqual(expected(1000));
  }, 60_000);

  it('a Durable Object holds one engine link for many clients and relays each stream exact', async () => {
    const a = await client('/hub');
    const b = await client('/hub');
    const run = async (c: typeof a, n: number) => {
      const anchor = c.node.createAnchor<string>();
      const reading = readAll(anchor);
      const answer = (await c.messenger.request(c.peer, 'chat', { handle: anchor.handle, n })) as {
        sent: number;
        relayed: number;
        end: string | null;
      };
      return { answer, tokens: await reading };
    };
    const [ra, rb] = await Promise.all([run(a, 600), run(b, 400)]);
    expect(ra.tokens).toEqual(expected(600));
    expect(rb.tokens).toEqual(expected(400));
    expect(ra.answer).toMatchObject({ sent: 600, relayed: 600, end: null });
    expect(rb.answer).toMatchObject({ sent: 400, relayed: 400, end: null });
    // Both clients' streams came over the object's one link to the engine.
    expect(engine.messenger.peers()).toHaveLength(1);
    expect(engine.node.metrics()['velo_streaming_mux_live_slots']).toBe(0);
  }, 60_000);

  it('outside Workers the adapter refuses to start with ERR_UNSUPPORTED_RUNTIME, naming what to use', () => {
    expect(() => cloudflareWebSocketTransport()).toThrow(/WebSocketPair.*ws-server|ws-server/);
    try {
      cloudflareWebSocketTransport();
    } catch (e) {
      expect((e as { code: string }).code).toBe('ERR_UNSUPPORTED_RUNTIME');
    }
  });
});
