// Node-side fixtures for the WebTransport tests: a dev certificate on disk, Deno processes, a vite
// dev server that bundles the browser entries, and Chromium through playwright-core.
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createServer, type ViteDevServer } from 'vite';
import { createDevCertificate, type DevCertificate } from '../../src/adapters/dev-cert.ts';
import { scratchDir } from '../support/scratch.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
export const DENO = join(ROOT, 'node_modules/.bin/deno');
export const DENO_ENV = { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' };

export interface CertFiles extends DevCertificate {
  readonly dir: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export async function certOnDisk(): Promise<CertFiles> {
  const cert = await createDevCertificate();
  const dir = scratchDir('lanemux-wt-');
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  writeFileSync(certFile, cert.certPem);
  writeFileSync(keyFile, cert.keyPem);
  return { ...cert, dir, certFile, keyFile };
}

export function removeDir(dir: string | undefined): void {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
}

/** Spawn `deno run` on a script that prints one JSON line when ready; resolve with it. */
export function denoScript(
  args: string[],
  stderr: string[] = [],
): Promise<{ child: ChildProcess; ready: Record<string, unknown> }> {
  return new Promise((res, rej) => {
    // stdin is a pipe the script watches: if this process dies without stopping it, the child exits on EOF.
    const child = spawn(DENO, ['run', '--unstable-net', '--allow-net', '--allow-read', '--allow-env', ...args], {
      cwd: ROOT,
      env: DENO_ENV,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stderr?.on('data', (d: Buffer) => stderr.push(d.toString()));
    const timer = setTimeout(() => rej(new Error(`deno ${args.join(' ')} not ready: ${stderr.join('')}`)), 20_000);
    child.on('error', rej);
    child.on('exit', (code) => rej(new Error(`deno exited ${code}: ${stderr.join('')}`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      res({ child, ready: JSON.parse(line) as Record<string, unknown> });
    });
  });
}

export function stop(child: ChildProcess | undefined): void {
  if (child === undefined || child.exitCode !== null) return;
  child.removeAllListeners('exit');
  child.kill('SIGTERM');
}

/** vite's dev server over the repo root (bundles TS for the page), `vitest` aliased to the portable shim. */
export async function viteServer(): Promise<{ server: ViteDevServer; origin: string; cacheDir: string }> {
  const cacheDir = scratchDir('lanemux-vite-');
  const server = await createServer({
    configFile: false,
    root: ROOT,
    cacheDir,
    logLevel: 'error',
    clearScreen: false,
    resolve: { alias: [{ find: /^vitest$/, replacement: join(ROOT, 'test/portable/vitest.ts') }] },
    server: { host: '127.0.0.1', port: 0, hmr: false, watch: null },
    // Scan only these pages (the examples import `lanemux` by name, which resolves only in a built package copy).
    optimizeDeps: { include: ['zod', '@msgpack/msgpack'], entries: ['test/webtransport/browser/*.html'] },
  });
  await server.listen();
  const addr = server.httpServer?.address();
  if (addr === null || addr === undefined || typeof addr === 'string') throw new Error('vite did not listen');
  // http://127.0.0.1 is a secure context, as WebTransport requires.
  return { server, origin: `http://127.0.0.1:${addr.port}`, cacheDir };
}

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Headless Debian Chromium with a fresh profile (the flags runtimes.md lists). */
export async function launchChromium(): Promise<{ ctx: BrowserContext; profile: string }> {
  const profile = scratchDir('lanemux-chromium-');
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
  });
  return { ctx, profile };
}

/** A page on `url`, once its entry has set `globalThis[ready]`; console lines go to `logs`. */
export async function openPage(ctx: BrowserContext, url: string, ready: string, logs: string[]): Promise<Page> {
  const page = await ctx.newPage();
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(url);
  await page.waitForFunction((name) => (globalThis as Record<string, unknown>)[name] !== undefined, ready, {
    timeout: 30_000,
  });
  return page;
}
