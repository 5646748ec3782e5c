// `lanemux/client` over WebTransport in Debian's Chromium (playwright-core), the page bundled by vite's
// dev server from src/client.ts only: `webTransportCarrier` against the Deno WebTransport server
// adapter (client-server.deno.ts; the page trusts its development certificate by hash), and
// `browserCarrier`'s fallback to a Node WebSocket server (e2e/servers/node-ws-server.ts).
import type { ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import type { BrowserContext, Page } from 'playwright-core';
import type { ViteDevServer } from 'vite';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type NodeWsServer, startNodeWsServer } from '../../e2e/servers/node-ws-server.ts';
import type { ClientApi } from './browser/client-entry.ts';
import {
  type CertFiles,
  certOnDisk,
  denoScript,
  launchChromium,
  openPage,
  removeDir,
  stop,
  viteServer,
} from './support.ts';

let cert: CertFiles;
let deno: ChildProcess | undefined;
let wtUrl = '';
let vite: { server: ViteDevServer; origin: string; cacheDir: string } | undefined;
let browser: { ctx: BrowserContext; profile: string } | undefined;
let ws: NodeWsServer;
const pages: Page[] = [];
const logs: string[] = [];
/** Callers waiting for the Deno server's answer to a stdin command, in order (one line each). */
const answers: Array<(line: string) => void> = [];

beforeAll(async () => {
  cert = await certOnDisk();
  const [d, v, b, w] = await Promise.all([
    denoScript(['--node-modules-dir=manual', 'test/webtransport/client-server.deno.ts', cert.dir]),
    viteServer(),
    launchChromium(),
    startNodeWsServer(),
  ]);
  deno = d.child;
  wtUrl = d.ready['url'] as string;
  let rest = '';
  deno.stdout!.on('data', (chunk: Buffer) => {
    rest += chunk.toString();
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      answers.shift()?.(line);
    }
  });
  vite = v;
  browser = b;
  ws = w;
  ws.node.serve<{ n: number }, string>('count', async (req, sender) => {
    for (let i = 0; i < req.n; i++) await sender.send(`tok${i}`);
  });
}, 60_000);

afterEach(async () => {
  for (const p of pages.splice(0)) {
    await p.evaluate(() => (globalThis as unknown as { lanemuxClient: ClientApi }).lanemuxClient.close());
    await p.close();
  }
  expect(logs.filter((l) => l.startsWith('pageerror'))).toEqual([]);
});

afterAll(async () => {
  stop(deno);
  try {
    await ws?.close();
    await browser?.ctx.close();
    await vite?.server.close();
  } finally {
    removeDir(browser?.profile);
    removeDir(vite?.cacheDir);
    removeDir(cert?.dir);
  }
});

/** Send the Deno server a command and read its one-line JSON answer. */
function denoCommand<T>(command: string): Promise<T> {
  return new Promise((resolve) => {
    answers.push((line) => resolve(JSON.parse(line) as T));
    deno!.stdin!.write(`${command}\n`);
  });
}

/** A fresh page; `call(page, m, …)` runs `lanemuxClient.m(…)` in it. */
async function newPage(): Promise<Page> {
  const page = await openPage(
    browser!.ctx,
    `${vite!.origin}/test/webtransport/browser/client.html`,
    'lanemuxClient',
    logs,
  );
  pages.push(page);
  return page;
}

function call<K extends keyof ClientApi>(
  page: Page,
  method: K,
  ...args: Parameters<ClientApi[K]>
): Promise<Awaited<ReturnType<ClientApi[K]>>> {
  return page.evaluate(
    ([m, a]) => {
      const api = (globalThis as unknown as { lanemuxClient: Record<string, (...x: unknown[]) => unknown> })
        .lanemuxClient;
      return api[m]!(...a);
    },
    [method, args] as [string, unknown[]],
  ) as Promise<Awaited<ReturnType<ClientApi[K]>>>;
}

const toks = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `tok${from + i}`);

describe('lanemux/client over WebTransport (Chromium, Deno server)', () => {
  it("streams a served method's tokens in order over webTransportCarrier", async () => {
    const page = await newPage();
    const c = await call(page, 'connect', { url: wtUrl, hashHex: cert.hashHex });
    expect(c.server).toMatch(/^[0-9a-f]{16}$/);
    const [a, b] = await Promise.all([
      call(page, 'callAndRead', 'a', 'count', { n: 500 }, 500),
      call(page, 'callAndRead', 'b', 'count', { n: 300 }, 300),
    ]);
    expect(a).toEqual(toks(0, 500));
    expect(b).toEqual(toks(0, 300));
    expect(await call(page, 'readRest', 'a')).toEqual({ items: [], end: 'done' });
    expect((await call(page, 'state')).hashCalls).toBe(1);
  }, 30_000);

  it('cancel ends the call in the page and aborts the handler on the server', async () => {
    const page = await newPage();
    await call(page, 'connect', { url: wtUrl, hashHex: cert.hashHex });
    const before = await denoCommand<{ aborted: number }>('state');
    expect(await call(page, 'callAndRead', 'f', 'forever', {}, 5)).toEqual([0, 1, 2, 3, 4]);
    expect((await call(page, 'cancel', 'f')).end).toBe('done');
    const deadline = performance.now() + 10_000;
    for (;;) {
      const s = await denoCommand<{ aborted: number; liveSlots: number }>('state');
      const pageSlots = (await call(page, 'state')).liveSlots;
      if (s.aborted === before.aborted + 1 && s.liveSlots === 0 && pageSlots === 0) break;
      if (performance.now() > deadline) throw new Error(`not cancelled: ${JSON.stringify({ s, pageSlots })}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }, 30_000);

  it('a stream resumes on a new session after its session is killed: nothing lost, repeated or reordered', async () => {
    const page = await newPage();
    await call(page, 'connect', { url: wtUrl, hashHex: cert.hashHex });
    // The handler holds before tok40 until released: the cut falls between the two halves.
    expect(await call(page, 'callAndRead', 'r', 'count', { n: 200, hold: 40 }, 40)).toEqual(toks(0, 40));
    expect((await denoCommand<{ cut: number }>('cut')).cut).toBeGreaterThanOrEqual(1);
    await denoCommand('release');
    expect(await call(page, 'readRest', 'r')).toEqual({ items: toks(40, 200), end: 'done' });
    const s = await call(page, 'state');
    expect(s.downs).toBe(1);
    // A new session asked for the hashes again (a restarted dev server's new certificate would be found).
    expect(s.hashCalls).toBe(2);
  }, 30_000);
});

describe('lanemux/client: browserCarrier falls back to WebSocket (Chromium)', () => {
  it('a page without WebTransport streams over WebSocket and reports it', async () => {
    const page = await newPage();
    const c = await call(page, 'connect', {
      url: wtUrl,
      hashHex: cert.hashHex,
      wsUrl: ws.url,
      deleteWebTransport: true,
    });
    expect(c.pageHasWebTransport).toBe(false);
    expect(c.server).toBe(ws.node.workerId.toString(16).padStart(16, '0'));
    expect(await call(page, 'callAndRead', 'a', 'count', { n: 200 }, 200)).toEqual(toks(0, 200));
    const s = await call(page, 'state');
    expect(s.events).toEqual([{ transport: 'websocket', url: ws.url, reason: 'this page has no WebTransport' }]);
    expect(s.hashCalls).toBe(0);
  }, 30_000);

  it('a WebTransport URL nothing answers on falls back to WebSocket within the timeout, and streams', async () => {
    const s0 = createSocket('udp4');
    await new Promise<void>((r) => s0.bind(0, '127.0.0.1', r));
    const port = s0.address().port;
    await new Promise<void>((r) => s0.close(() => r()));
    const page = await newPage();
    const c = await call(page, 'connect', {
      url: `https://127.0.0.1:${port}/lanemux`,
      hashHex: cert.hashHex,
      wsUrl: ws.url,
    });
    expect(c.pageHasWebTransport).toBe(true);
    // webTransportTimeoutMs (4 s) bounds the WebTransport attempt, then the WebSocket opens.
    expect(c.connectMs).toBeLessThan(8_000);
    expect(await call(page, 'callAndRead', 'a', 'count', { n: 200 }, 200)).toEqual(toks(0, 200));
    const s = await call(page, 'state');
    expect(s.events).toHaveLength(1);
    expect(s.events[0]).toMatchObject({ transport: 'websocket', url: ws.url });
    expect(s.events[0]!.reason).toMatch(/^WebTransport failed: /);
    expect(s.hashCalls).toBe(1);
  }, 30_000);

  it('a page where WebTransport works streams over it and reports it', async () => {
    const page = await newPage();
    await call(page, 'connect', { url: wtUrl, hashHex: cert.hashHex, wsUrl: ws.url });
    expect(await call(page, 'callAndRead', 'a', 'count', { n: 200 }, 200)).toEqual(toks(0, 200));
    expect((await call(page, 'state')).events).toEqual([{ transport: 'webtransport', url: wtUrl }]);
  }, 30_000);

  it('a WebTransport server that never answers (UDP dropped): WebSocket after webTransportTimeoutMs (4 s)', async () => {
    // A UDP socket that swallows every packet: the QUIC handshake never completes.
    const sink = createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', r));
    let packets = 0;
    sink.on('message', () => packets++);
    try {
      const page = await newPage();
      const c = await call(page, 'connect', {
        url: `https://127.0.0.1:${sink.address().port}/lanemux`,
        hashHex: cert.hashHex,
        wsUrl: ws.url,
      });
      expect(packets).toBeGreaterThan(0);
      expect(c.connectMs).toBeGreaterThanOrEqual(3_000);
      expect(c.connectMs).toBeLessThan(8_000);
      expect(await call(page, 'callAndRead', 'a', 'count', { n: 50 }, 50)).toEqual(toks(0, 50));
      const s = await call(page, 'state');
      // Whichever gives up first, our 4 s bound or Chromium's own QUIC handshake timer (about as long).
      expect(s.events[0]?.reason).toMatch(/no session within 4000 ms|Opening handshake failed/);
    } finally {
      await new Promise<void>((r) => sink.close(() => r()));
    }
  }, 30_000);
});
