/**
 * The playground end to end: build the page with vite, start the Node engine (server-node.mjs, from
 * a built copy of the package), open the page in Chromium, start streaming, and check that live
 * numbers move: tokens are read and rendered, batches/s > 0, and switching the flush policy to
 * Manual rebuilds the engine and streaming resumes. With LANEMUX_UPDATE_SCREENSHOT=1 it writes
 * `docs/playground.png` (the README's screenshot).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage, ROOT, type PackageFixture } from '../packaging/package-fixture.ts';
import { scratchDir } from '../support/scratch.ts';

const CHROME_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let pkg: PackageFixture;
let pageDir: string;
let profile: string;
let server: ChildProcess | undefined;
let ctx: BrowserContext | undefined;
let url: string;
let deno: ChildProcess | undefined;

/** Spawn a server script and wait for its `{"ready":true,...}` line. */
async function startServer(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ child: ChildProcess; ready: { url?: string; info?: string } }> {
  const child = spawn(cmd, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    cwd: pkg.dir,
    env: { ...process.env, ...env },
  });
  const ready = await new Promise<{ url?: string; info?: string }>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code})`)));
    createInterface({ input: child.stdout! }).once('line', (line) =>
      resolve(JSON.parse(line) as { url?: string; info?: string }),
    );
  });
  return { child, ready };
}

beforeAll(async () => {
  pkg = buildPackage(['playground/engine.mjs', 'playground/server-node.mjs', 'playground/server-deno.ts']);
  // The Deno server imports the WebTransport adapter and certificate helper from the sources.
  symlinkSync(join(ROOT, 'src'), join(pkg.dir, 'src'), 'dir');
  pageDir = scratchDir('lanemux-page-');
  await build({
    configFile: join(ROOT, 'playground', 'vite.config.ts'),
    logLevel: 'silent',
    build: { outDir: pageDir, emptyOutDir: true },
  });
  const node = await startServer(process.execPath, [
    join(pkg.dir, 'playground', 'server-node.mjs'),
    '--port',
    '0',
    '--static',
    pageDir,
    '--quiet',
  ]);
  server = node.child;
  url = node.ready.url!;
  profile = scratchDir('lanemux-chromium-');
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: CHROME_ARGS,
    viewport: { width: 1280, height: 1000 },
  });
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  server?.kill('SIGTERM');
  deno?.kill('SIGTERM');
  pkg?.remove();
  for (const d of [pageDir, profile]) if (d) rmSync(d, { recursive: true, force: true });
});

const num = async (page: Page, id: string): Promise<number> =>
  Number((await page.textContent(`#${id}`))?.replace(/[^\d.]/g, '') || 0);

describe('playground', () => {
  it('streams tokens from the Node engine into the page, shows live metrics, follows a policy change, and writes docs/playground.png', async () => {
    const page = ctx!.pages()[0] ?? (await ctx!.newPage());
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(url);
    // The page found the engine (GET /engine.json, then the WebSocket dial): Start is enabled.
    await page.waitForFunction(() => !(document.getElementById('start') as HTMLButtonElement).disabled, null, {
      timeout: 15_000,
    });
    expect(await page.textContent('#status')).toContain('connected to node engine over websocket');

    // The page opens already streaming (no click). Live numbers move: the engine reports batches and streams, the page reads and renders tokens.
    await page.waitForFunction(
      () => {
        const n = (id: string) => Number(document.getElementById(id)?.textContent?.replace(/[^\d.]/g, '') || 0);
        return n('tokens-read') > 500 && n('batches-per-sec') > 0 && n('active-streams') > 0 && n('tokens-per-sec') > 0;
      },
      null,
      { timeout: 20_000, polling: 100 },
    );
    expect(await page.textContent('#engine-config')).toContain('flush auto');
    const rendered = await page.$$eval('#live-tokens div', (rows) => rows.map((r) => r.textContent ?? ''));
    expect(rendered.length).toBeGreaterThan(0);
    expect(rendered.join(' ')).toMatch(/#\d+ .*\w+/);

    // Manual: the engine rebuilds its node with the new policy, the page reconnects, streaming resumes.
    await page.check('input[name="flush"][value="manual"]');
    await page.waitForFunction(
      () => document.getElementById('engine-config')?.textContent?.includes('flush manual'),
      null,
      { timeout: 20_000, polling: 100 },
    );
    const before = await num(page, 'tokens-read');
    await page.waitForFunction(
      (base) => {
        const n = (id: string) => Number(document.getElementById(id)?.textContent?.replace(/[^\d.]/g, '') || 0);
        return n('tokens-read') > base + 2_000 && n('batches-per-sec') > 0;
      },
      before,
      { timeout: 30_000, polling: 100 },
    );
    expect(await page.textContent('#status')).toContain('connected');

    // Side by side: the same streams also over one WebSocket each; the page shows both writes/s,
    // and the per-stream path writes many times more often for the same tokens.
    await page.check('input[name="compare"]');
    await page.waitForFunction(
      () => {
        const n = (id: string) => Number(document.getElementById(id)?.textContent?.replace(/[^\d.]/g, '') || 0);
        return (
          n('ps-streams') >= 32 && n('mux-writes-per-sec') > 0 && n('ps-writes-per-sec') > 5 * n('mux-writes-per-sec')
        );
      },
      null,
      { timeout: 30_000, polling: 100 },
    );
    expect(await page.textContent('#writes-ratio')).toMatch(/^\d+× the writes without the multiplexer$/);
    await page.uncheck('input[name="compare"]');

    // A slow reader with a small window: the engine produces 40 tokens/s per stream, the page reads
    // 20, so every slot runs out of credit and the engine withholds records until the page reads.
    await page.evaluate(() => {
      const form = document.getElementById('form') as HTMLFormElement;
      const set = (name: string, value: string) => ((form.elements.namedItem(name) as HTMLInputElement).value = value);
      set('credit', '8');
      set('reader', '20');
      set('rate', '40');
      set('streams', '128');
      for (const name of ['rate', 'streams'])
        (form.elements.namedItem(name) as HTMLInputElement).dispatchEvent(new Event('input'));
      form.dispatchEvent(new Event('change'));
    });
    await page.waitForFunction(
      () => {
        const n = (id: string) => Number(document.getElementById(id)?.textContent?.replace(/[^\d.]/g, '') || 0);
        return (
          n('withheld') > 1000 &&
          n('active-streams') >= 100 &&
          document.getElementById('credit-window')?.textContent === '8'
        );
      },
      null,
      { timeout: 30_000, polling: 100 },
    );
    expect(errors).toEqual([]);
    // The README's screenshot is refreshed on request only, so a test run leaves the tree clean.
    const shot =
      process.env['LANEMUX_UPDATE_SCREENSHOT'] === '1'
        ? join(ROOT, 'docs', 'playground.png')
        : join(scratchDir('lanemux-shot-'), 'playground.png');
    await page.screenshot({ path: shot, fullPage: true });
  }, 120_000);

  it('streams from the Deno engine over WebTransport when the page is pointed at it (?engine=…)', async () => {
    const started = await startServer(
      join(ROOT, 'node_modules', '.bin', 'deno'),
      [
        'run',
        '--unstable-net',
        '--node-modules-dir=manual',
        '-A',
        join(pkg.dir, 'playground', 'server-deno.ts'),
        '--port',
        '0',
        '--quiet',
      ],
      { DENO_NO_UPDATE_CHECK: '1' },
    );
    deno = started.child;
    const page = await ctx!.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${url}?engine=${encodeURIComponent(started.ready.info!)}`);
    await page.waitForFunction(() => !(document.getElementById('start') as HTMLButtonElement).disabled, null, {
      timeout: 20_000,
    });
    expect(await page.textContent('#status')).toContain('connected to deno engine over webtransport');
    await page.click('#start');
    await page.waitForFunction(
      () => {
        const n = (id: string) => Number(document.getElementById(id)?.textContent?.replace(/[^\d.]/g, '') || 0);
        return n('tokens-read') > 500 && n('batches-per-sec') > 0;
      },
      null,
      { timeout: 20_000, polling: 100 },
    );
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);
});
