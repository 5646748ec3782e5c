// Chromium (playwright-core) → Deno over WebTransport.
// 1. The product adapters end to end: a Chromium messenger on webTransportClientTransport (bundled by
//    vite) and a Deno messenger on webTransportServerTransport (echo-server.deno.ts). Proves Chromium
//    accepts the WebCrypto dev certificate by hash (and refuses a wrong hash), and measures 64-byte
//    round trips and throughput; the Deno client does the same against the same server.
// 2. The transport conformance suite inside Chromium (vitest aliased to the portable shim). Clients
//    are the product client adapter; the listening messenger is in the page too and is reached through
//    a Deno WebTransport relay (relay-server.deno.ts), since a browser cannot listen.
// LANEMUX_WT_BENCH=1 runs longer measurements (5,000 round trips, 200,000 messages, 1 and 4 lanes).
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import type { BrowserContext, Page } from 'playwright-core';
import type { ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConformanceApi } from './browser/conformance-entry.ts';
import type { BrowserApi } from './browser/entry.ts';
import {
  DENO,
  DENO_ENV,
  ROOT,
  certOnDisk,
  denoScript,
  launchChromium,
  openPage,
  removeDir,
  stop,
  viteServer,
  type CertFiles,
} from './support.ts';

const LONG = process.env['LANEMUX_WT_BENCH'] === '1';
const RTTS = LONG ? 5_000 : 500;
const MESSAGES = LONG ? 200_000 : 20_000;

let cert: CertFiles;
const children: ChildProcess[] = [];
const addresses: Record<number, string> = {};
let relay = '';
let vite: { server: ViteDevServer; origin: string; cacheDir: string } | undefined;
let browser: { ctx: BrowserContext; profile: string } | undefined;
let benchPage: Page;
let conformancePage: Page;
const logs: string[] = [];

beforeAll(async () => {
  cert = await certOnDisk();
  const [one, four, r, v, b] = await Promise.all([
    denoScript(['test/webtransport/echo-server.deno.ts', cert.certFile, cert.keyFile, '1']),
    denoScript(['test/webtransport/echo-server.deno.ts', cert.certFile, cert.keyFile, '4']),
    denoScript(['test/webtransport/relay-server.deno.ts', cert.certFile, cert.keyFile]),
    viteServer(),
    launchChromium(),
  ]);
  children.push(one.child, four.child, r.child);
  addresses[1] = one.ready['address'] as string;
  addresses[4] = four.ready['address'] as string;
  relay = r.ready['relay'] as string;
  vite = v;
  browser = b;
  [benchPage, conformancePage] = await Promise.all([
    openPage(b.ctx, `${v.origin}/test/webtransport/browser/index.html`, 'lanemuxWt', logs),
    openPage(b.ctx, `${v.origin}/test/webtransport/browser/conformance.html`, 'lanemuxWtConformance', logs),
  ]);
}, 60_000);

afterAll(async () => {
  for (const c of children) stop(c);
  try {
    await browser?.ctx.close();
    await vite?.server.close();
  } finally {
    removeDir(browser?.profile);
    removeDir(vite?.cacheDir);
    removeDir(cert?.dir);
  }
});

const bench = (o: Parameters<BrowserApi['bench']>[0]) =>
  benchPage.evaluate((x) => (globalThis as unknown as { lanemuxWt: BrowserApi }).lanemuxWt.bench(x), o);
const tryConnect = (o: Parameters<BrowserApi['tryConnect']>[0]) =>
  benchPage.evaluate((x) => (globalThis as unknown as { lanemuxWt: BrowserApi }).lanemuxWt.tryConnect(x), o);

describe('WebTransport: Chromium → Deno server adapter (product adapters on both ends)', () => {
  it('Chromium accepts the WebCrypto dev certificate by hash and carries 1- and 4-lane messenger links', async () => {
    for (const lanes of [1, 4]) {
      const address = addresses[lanes] as string;
      expect(address).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/lanemux$/);
      const r = await bench({ address, hashHex: cert.hashHex, lanes, rtts: RTTS, messages: MESSAGES });
      console.log(`chromium → deno, ${lanes} lane(s), 64-byte messages:`, JSON.stringify(r));
      expect(r.requestEcho).toBe('hello over webtransport');
      expect(r.rttCount).toBe(RTTS);
      expect(r.rttP50Ms).toBeLessThan(50);
      expect(r.messages).toBe(MESSAGES);
    }
  }, 120_000);

  it('refuses a server whose certificate does not match the hash (ERR_CONNECT); the right hash connects', async () => {
    const address = addresses[1] as string;
    expect(await tryConnect({ address, hashHex: 'ab'.repeat(32) })).toMatch(/^ERR_CONNECT: /);
    expect(await tryConnect({ address, hashHex: cert.hashHex })).toBe('connected');
  }, 30_000);

  it('Deno client (global WebTransport) → the same Deno server adapter, 1 and 4 lanes', () => {
    for (const lanes of [1, 4]) {
      const out = execFileSync(
        DENO,
        [
          'run',
          '--unstable-net',
          '--allow-net',
          'test/webtransport/bench-client.deno.ts',
          addresses[lanes] as string,
          cert.hashHex,
          String(lanes),
          String(RTTS),
          String(MESSAGES),
        ],
        {
          cwd: ROOT,
          env: DENO_ENV,
          encoding: 'utf8',
          timeout: 60_000,
        },
      );
      const r = JSON.parse(out.trim().split('\n').pop() as string) as { requestEcho: string; rttCount: number };
      console.log(`deno → deno, ${lanes} lane(s), 64-byte messages:`, JSON.stringify(r));
      expect(r.requestEcho).toBe('hello over webtransport');
      expect(r.rttCount).toBe(RTTS);
    }
  }, 120_000);
});

describe('transport conformance over WebTransport: Chromium → Deno', () => {
  for (const lanes of [1, 4]) {
    const filter = `chromium→deno, ${lanes} lane${lanes > 1 ? 's' : ''} >`;
    it(`every conformance case passes in Chromium, ${lanes} lane${lanes > 1 ? 's' : ''}`, async () => {
      const r = await conformancePage.evaluate(
        (o) => (globalThis as unknown as { lanemuxWtConformance: ConformanceApi }).lanemuxWtConformance.run(o),
        { relay, hashHex: cert.hashHex, filter },
      );
      const summary = r.results
        .map(
          (x) =>
            `${x.passed ? 'ok  ' : 'FAIL'} ${x.name} (${Math.round(x.durationMs)} ms)${x.error === undefined ? '' : `\n       ${x.error.split('\n').slice(0, 3).join('\n       ')}`}`,
        )
        .join('\n');
      console.log(`chromium conformance, ${lanes} lane(s):\n${summary}`);
      expect(r.failed, `failed cases:\n${summary}\npage log:\n${logs.slice(-20).join('\n')}`).toBe(0);
      expect(r.passed).toBeGreaterThanOrEqual(9);
    }, 120_000);
  }
});
