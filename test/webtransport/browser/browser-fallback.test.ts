// The browser client adapter (browserClientTransport) in Debian's Chromium (playwright-core), the page
// bundled by vite's dev server: WebTransport first, WebSocket when it must.
// 1. A page whose `WebTransport` global was deleted streams over WebSocket (Node `ws` server adapter).
// 2. A page with WebTransport whose WebTransport server is not there falls back to WebSocket within
//    the WebTransport connect timeout and streams over it.
// 3. A page whose WebTransport server never answers falls back once the connect timeout (4 s) expires.
// 4. A page where WebTransport works (the Deno server adapter, a development certificate trusted by
//    its hash) streams over WebTransport and never opens a WebSocket.
import type { ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import type { BrowserContext, Page } from 'playwright-core';
import type { ViteDevServer } from 'vite';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNodeWsServer, type NodeWsServer } from '../../../e2e/servers/node-ws-server.ts';
import { tokenText } from '../../../e2e/support/protocol.ts';
import {
  certOnDisk,
  denoScript,
  launchChromium,
  openPage,
  removeDir,
  stop,
  viteServer,
  type CertFiles,
} from '../support.ts';
import type { FallbackApi, FallbackResult, FallbackRun } from './fallback-entry.ts';

let cert: CertFiles;
let deno: ChildProcess | undefined;
let wtUrl = '';
let vite: { server: ViteDevServer; origin: string; cacheDir: string } | undefined;
let browser: { ctx: BrowserContext; profile: string } | undefined;
let ws: NodeWsServer;
const pages: Page[] = [];
const logs: string[] = [];

beforeAll(async () => {
  cert = await certOnDisk();
  const [d, v, b, w] = await Promise.all([
    denoScript(['--node-modules-dir=manual', 'e2e/servers/deno-wt-server.ts', cert.dir]),
    viteServer(),
    launchChromium(),
    startNodeWsServer(),
  ]);
  deno = d.child;
  wtUrl = d.ready['url'] as string;
  vite = v;
  browser = b;
  ws = w;
}, 60_000);

afterEach(async () => {
  for (const p of pages.splice(0)) await p.close();
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

/** One run in a fresh page (a page whose WebTransport was deleted stays that way). */
async function run(o: FallbackRun): Promise<FallbackResult> {
  const page = await openPage(
    browser!.ctx,
    `${vite!.origin}/test/webtransport/browser/fallback.html`,
    'lanemuxFallback',
    logs,
  );
  pages.push(page);
  return page.evaluate((x) => (globalThis as unknown as { lanemuxFallback: FallbackApi }).lanemuxFallback.run(x), o);
}

/** A loopback UDP port nothing listens on (bound, then released): a WebTransport server that is down. */
async function deadUdpPort(): Promise<number> {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const expected = (prompt: string, n: number): string[] => Array.from({ length: n }, (_, i) => tokenText(prompt, i));

describe('browser client in Chromium: WebTransport first, WebSocket when it must', () => {
  it('a page without WebTransport streams over WebSocket, and says why', async () => {
    const r = await run({ address: wtUrl, wsUrl: ws.url, deleteWebTransport: true, prompt: 'nowt', n: 200 });
    expect(r.pageHasWebTransport).toBe(false);
    expect(r.transportInUse).toBe('websocket');
    expect(r.events).toEqual([{ transport: 'websocket', url: ws.url, reason: 'this page has no WebTransport' }]);
    expect(r.hashCalls).toBe(0);
    expect(r.orderOk).toBe(true);
    expect(r.tokens).toEqual(expected('nowt', 200));
    expect(ws.served.get('nowt')?.outcome).toBe('finalized');
  }, 30_000);

  it('a page whose WebTransport server is down falls back to WebSocket within the connect timeout, and streams', async () => {
    const down = `https://127.0.0.1:${await deadUdpPort()}/lanemux`;
    const r = await run({
      address: down,
      wsUrl: ws.url,
      hashHex: cert.hashHex,
      deleteWebTransport: false,
      prompt: 'down',
      n: 200,
    });
    console.log(
      `[browser client] WebTransport down → WebSocket after ${r.connectMs.toFixed(0)} ms: ${r.events[0]?.reason}`,
    );
    expect(r.pageHasWebTransport).toBe(true);
    expect(r.transportInUse).toBe('websocket');
    expect(r.events).toHaveLength(1);
    expect(r.events[0]).toMatchObject({ transport: 'websocket', url: ws.url });
    expect(r.events[0]!.reason).toMatch(/^WebTransport failed: /);
    // The default webTransport.connectTimeoutMs (4 s) bounds the wait, plus the WebSocket open.
    expect(r.connectMs).toBeLessThan(8_000);
    expect(r.hashCalls).toBe(1);
    expect(r.tokens).toEqual(expected('down', 200));
  }, 30_000);

  it('a page whose WebTransport server never answers (UDP dropped) falls back after webTransport.connectTimeoutMs (4 s)', async () => {
    // A UDP socket that swallows every packet: the QUIC handshake never completes.
    const sink = createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', r));
    let packets = 0;
    sink.on('message', () => packets++);
    try {
      const address = `https://127.0.0.1:${sink.address().port}/lanemux`;
      const r = await run({
        address,
        wsUrl: ws.url,
        hashHex: cert.hashHex,
        deleteWebTransport: false,
        prompt: 'blackhole',
        n: 50,
      });
      console.log(
        `[browser client] WebTransport unanswered → WebSocket after ${r.connectMs.toFixed(0)} ms: ${r.events[0]?.reason}`,
      );
      expect(packets).toBeGreaterThan(0);
      expect(r.transportInUse).toBe('websocket');
      // Whichever gives up first, our 4 s bound or Chromium's own QUIC handshake timer (about as long), the
      // page falls back; a loaded machine decides the race either way.
      expect(r.events[0]!.reason).toMatch(/not ready within 4000 ms|Opening handshake failed/);
      expect(r.connectMs).toBeGreaterThanOrEqual(3_000);
      expect(r.connectMs).toBeLessThan(8_000);
      expect(r.tokens).toEqual(expected('blackhole', 50));
    } finally {
      await new Promise<void>((r) => sink.close(() => r()));
    }
  }, 30_000);

  it('a page where WebTransport works streams over it (Deno server, certificate by hash) and opens no WebSocket', async () => {
    const peersBefore = ws.messenger.peers().length;
    const r = await run({
      address: wtUrl,
      wsUrl: ws.url,
      hashHex: cert.hashHex,
      deleteWebTransport: false,
      prompt: 'wt',
      n: 200,
    });
    expect(r.pageHasWebTransport).toBe(true);
    expect(r.transportInUse).toBe('webtransport');
    expect(r.events).toEqual([{ transport: 'webtransport', url: wtUrl, reason: undefined }]);
    expect(r.hashCalls).toBe(1);
    expect(r.orderOk).toBe(true);
    expect(r.tokens).toEqual(expected('wt', 200));
    expect(ws.served.has('wt')).toBe(false);
    expect(ws.messenger.peers().length).toBe(peersBefore);
  }, 30_000);
});
