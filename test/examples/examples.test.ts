/**
 * Every example in examples/ runs as a user would run it: from a built copy of the package (the
 * example files copied in, so `lanemux` resolves to the copy's dist by the package's own name), each
 * server started with its runtime (Node, Deno, Bun) and awaited on its `ready …` line, each client run
 * to its exit and its output checked exactly; pages are built with vite and run in Chromium.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_ARGS } from '../../e2e/support/harness.ts';
import { buildPackage, type PackageFixture, ROOT } from '../packaging/package-fixture.ts';
import { scratchDir } from '../support/scratch.ts';

const BIN = join(ROOT, 'node_modules', '.bin');
const DENO_ENV = { DENO_NO_UPDATE_CHECK: '1' };
const DENO_RUN = ['run', '--unstable-net', '--node-modules-dir=manual', '-A'];
/** Bound on every process: a server's ready line, a client's whole run. */
const PROCESS_MS = 30_000;

const exampleFiles = (readdirSync(join(ROOT, 'examples'), { recursive: true }) as string[])
  .map((f) => join('examples', f))
  .filter((f) => extname(f) !== '');

let pkg: PackageFixture;
let ctx: BrowserContext | undefined;
let profile: string | undefined;
const dirs: string[] = [];
const servers: Server[] = [];
const children = new Set<ChildProcess>();

beforeAll(() => {
  pkg = buildPackage(exampleFiles);
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  pkg?.remove();
  for (const d of [...dirs, profile]) if (d !== undefined) rmSync(d, { recursive: true, force: true });
});

/** Spawn `cmd` in the package copy; bounded by {@link PROCESS_MS}. */
function spawnIn(cmd: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(cmd, args, { cwd: pkg.dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Start a server and resolve with what follows `ready ` on its first such line. */
function startServer(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const child = spawnIn(cmd, args, { PORT: '0', ...env });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${args.join(' ')}: no ready line in ${PROCESS_MS} ms`)),
      PROCESS_MS,
    );
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}) before ready:\n${stderr}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.startsWith('ready ')) return;
      clearTimeout(timer);
      resolve(line.slice('ready '.length));
    });
  });
}

/** Run a client to its exit and resolve with its output lines; a non-zero exit or a timeout rejects. */
function runClient(cmd: string, args: string[]): Promise<string[]> {
  const child = spawnIn(cmd, args, {});
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')}: still running after ${PROCESS_MS} ms:\n${out}${err}`));
    }, PROCESS_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out.trimEnd().split('\n'));
      else reject(new Error(`${args.join(' ')} exited (${code}):\n${out}${err}`));
    });
  });
}

const example = (name: string, file: string): string => join(pkg.dir, 'examples', name, file);

/** Build an example's page with vite (from the package copy) and serve it on 127.0.0.1 (a secure context). */
async function servePage(name: string): Promise<string> {
  const outDir = scratchDir(`lanemux-example-${name}-`);
  dirs.push(outDir);
  await build({
    configFile: false,
    root: join(pkg.dir, 'examples', name),
    base: './',
    logLevel: 'silent',
    build: { outDir, emptyOutDir: true, target: 'es2022', minify: false, reportCompressedSize: false },
  });
  const http = createServer((req, res) => {
    const rel = normalize(new URL(req.url ?? '/', 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
    if (relative(outDir, join(outDir, rel)).startsWith('..')) return void res.writeHead(403).end();
    try {
      const body = readFileSync(join(outDir, rel));
      res.writeHead(200, { 'content-type': extname(rel) === '.js' ? 'text/javascript' : 'text/html' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  servers.push(http);
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
}

/** A new Chromium page (one browser for the file), collecting its uncaught errors. */
async function openPage(errors: string[]): Promise<Page> {
  if (ctx === undefined) {
    profile = scratchDir('lanemux-example-chromium-');
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: CHROMIUM_ARGS,
    });
  }
  const page = await ctx.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  return page;
}

describe('examples', () => {
  it('node-ws-chat: the page opens four chats at once over one WebSocket and renders each answer whole', async () => {
    const [address, pageUrl] = await Promise.all([
      startServer(process.execPath, [example('node-ws-chat', 'server.mjs')]),
      servePage('node-ws-chat'),
    ]);
    const errors: string[] = [];
    const page = await openPage(errors);
    await page.goto(`${pageUrl}?server=${encodeURIComponent(address)}`);
    await page.waitForFunction(() => document.querySelectorAll('#chats li[data-done="true"]').length === 4, null, {
      timeout: PROCESS_MS,
      polling: 50,
    });
    const answer = (prompt: string): string =>
      prompt + Array.from({ length: 39 }, (_, i) => ` ${prompt.length * (i + 2)}`).join('');
    expect(await page.$$eval('#chats li', (lis) => lis.map((li) => li.textContent))).toEqual(
      ['Hello', 'Bonjour', 'Hola', 'Ciao'].map(answer),
    );
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('deno-webtransport: a Node client gets its answer over WebSocket, a Chromium page over WebTransport', async () => {
    const ready = JSON.parse(
      await startServer(join(BIN, 'deno'), [...DENO_RUN, example('deno-webtransport', 'server.ts')], {
        ...DENO_ENV,
        WT_PORT: '0',
        WS_PORT: '0',
      }),
    ) as { webTransport: string; webSocket: string; certHash: string };
    expect(ready.webTransport).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/lanemux$/);
    expect(
      await runClient(process.execPath, [example('deno-webtransport', 'client.mjs'), ready.webSocket, 'hi']),
    ).toEqual(['Deno says: hi']);
    const pageUrl = await servePage('deno-webtransport');
    const errors: string[] = [];
    const page = await openPage(errors);
    const q = new URLSearchParams({ wt: ready.webTransport, ws: ready.webSocket, hash: ready.certHash });
    await page.goto(`${pageUrl}?${q}`);
    await page.waitForFunction(() => document.getElementById('answer')?.textContent !== '', null, {
      timeout: PROCESS_MS,
      polling: 50,
    });
    expect(await page.textContent('#answer')).toBe('Deno says: hello (over webtransport)');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('bun-server: a Node client makes three calls at once to a Bun WebSocket server', async () => {
    const address = await startServer(join(BIN, 'bun'), [example('bun-server', 'server.ts')]);
    expect(await runClient(process.execPath, [example('bun-server', 'client.mjs'), address])).toEqual([
      'Bun says: one',
      'Bun says: two',
      'Bun says: three',
    ]);
  }, 60_000);

  it.each([
    ['node', process.execPath, [], 'node.mjs', {}],
    ['deno', join(BIN, 'deno'), DENO_RUN, 'deno.ts', DENO_ENV],
    ['bun', join(BIN, 'bun'), [], 'bun.ts', {}],
  ] as const)(
    'hono on %s: one port serves the app at / and streams generate to a Node client',
    async (_, cmd, args, entry, env) => {
      const address = await startServer(cmd, [...args, example('hono', entry)], env);
      const page = await fetch(address.replace(/^ws:/, 'http:').replace(/\/lanemux$/, '/'));
      expect([page.status, await page.text()]).toEqual([200, 'Hello from Hono; lanemux is at /lanemux\n']);
      expect(await runClient(process.execPath, [example('hono', 'client.mjs'), address])).toEqual([
        'Hono says: one',
        'Hono says: two',
        'Hono says: three',
      ]);
    },
    60_000,
  );

  it("relay-frontend: four clients' streams pass engine → frontend → client whole and in order", async () => {
    const engine = await startServer(process.execPath, [example('relay-frontend', 'engine.mjs')]);
    const frontend = await startServer(process.execPath, [example('relay-frontend', 'frontend.mjs'), engine]);
    expect(await runClient(process.execPath, [example('relay-frontend', 'client.mjs'), frontend])).toEqual(
      ['a', 'b', 'c', 'd'].map((p) => `${p}: 1000 tokens, in order`),
    );
  }, 60_000);

  it("ai-chat: the client's lanemuxChatTransport and readUIMessageStream build the streamText answer exactly", async () => {
    const address = await startServer(process.execPath, [example('ai-chat', 'server.mjs')]);
    expect(await runClient(process.execPath, [example('ai-chat', 'client.mjs'), address, 'tell me a story'])).toEqual([
      'You said: tell me a story',
    ]);
  }, 60_000);
});
