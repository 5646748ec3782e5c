/**
 * Shared e2e setup: build the page with vite's programmatic API, serve it from
 * `http://127.0.0.1:PORT/` (a secure context, which WebTransport needs), and launch Debian's Chromium
 * through playwright-core with a fresh profile.
 */
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';
import { build } from 'vite';
import type { E2ePage } from '../page/api.ts';
import { scratchDir } from '../../test/support/scratch.ts';

const PAGE_ROOT = fileURLToPath(new URL('../page/', import.meta.url));

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // Several pages stream at once: none of them may be throttled as a background tab.
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
];

const TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.map': 'application/json',
};

/** The built page, a static server for it, and a browser. */
export interface E2eEnv {
  /** `http://127.0.0.1:PORT/` */
  readonly pageUrl: string;
  readonly context: BrowserContext;
  /** Open a new page on the built page and wait until its driver is installed. */
  openPage(): Promise<Page>;
  /** Uncaught errors and unhandled rejections of every page so far (a test checks it stays empty). */
  readonly pageErrors: string[];
  /** Milliseconds spent building, launching. */
  readonly timings: { buildMs: number; launchMs: number };
  close(): Promise<void>;
}

/**
 * Build the page into a temp dir (vite, no config file) and start everything. `pageRoot`: the page's
 * folder (one that sets `window.e2e`). Defaults to e2e/page.
 */
export async function startE2e(pageRoot: string = PAGE_ROOT): Promise<E2eEnv> {
  const outDir = scratchDir('lanemux-e2e-page-');
  const t0 = performance.now();
  await build({
    configFile: false,
    root: pageRoot,
    logLevel: 'warn',
    build: {
      outDir,
      emptyOutDir: true,
      minify: false,
      target: 'es2022',
      sourcemap: false,
      reportCompressedSize: false,
    },
  });
  const buildMs = performance.now() - t0;
  const http: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const file = normalize(join(outDir, path === '/' ? 'index.html' : path));
    if (!file.startsWith(resolve(outDir))) {
      res.statusCode = 403;
      res.end();
      return;
    }
    try {
      const body = readFileSync(file);
      res.setHeader('content-type', TYPES[extname(file)] ?? 'application/octet-stream');
      res.end(body);
    } catch {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  const pageUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  const profile = scratchDir('lanemux-e2e-chromium-');
  const t1 = performance.now();
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
  });
  const launchMs = performance.now() - t1;
  const errors: string[] = [];
  return {
    pageUrl,
    context,
    pageErrors: errors,
    timings: { buildMs: Math.round(buildMs), launchMs: Math.round(launchMs) },
    async openPage() {
      const blank = context.pages().find((p) => p.url() === 'about:blank');
      const page = blank ?? (await context.newPage());
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(pageUrl);
      await page.waitForFunction(() => typeof (window as unknown as { e2e?: unknown }).e2e === 'object');
      return page;
    },
    async close() {
      await context.close();
      await new Promise<void>((r) => http.close(() => r()));
      rmSync(profile, { recursive: true, force: true });
      rmSync(outDir, { recursive: true, force: true });
    },
  };
}

/** Call `window.e2e.<method>(...args)` in a page. */
export function drive<K extends keyof E2ePage>(
  page: Page,
  method: K,
  ...args: Parameters<E2ePage[K]>
): Promise<Awaited<ReturnType<E2ePage[K]>>> {
  return page.evaluate(
    ([m, a]) => {
      const api = (window as unknown as { e2e: Record<string, (...x: unknown[]) => unknown> }).e2e;
      return api[m]!(...a);
    },
    [method, args] as [string, unknown[]],
  ) as Promise<Awaited<ReturnType<E2ePage[K]>>>;
}
