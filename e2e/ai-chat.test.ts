/**
 * The AI SDK in Chromium: a minimal React page runs `useChat` with `lanemuxChatTransport`, the Node
 * server answers with `serveChat` around `streamText` (a mock model streaming 300 words), and the
 * page renders the assistant's answer exactly — through React, the AI SDK's chunk parser and
 * lanemux's call over WebSocket.
 */
import { readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { convertToModelMessages, streamText } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { chromium, type BrowserContext } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webSocketServerTransport } from '../src/adapters/ws-server.ts';
import { serveChat } from '../src/ai/index.ts';
import { createNode, type LanemuxNode } from '../src/index.ts';
import { scratchDir } from '../test/support/scratch.ts';
import { CHROMIUM_ARGS } from './support/harness.ts';

const WORDS = Array.from({ length: 300 }, (_, i) => `word${i} `);
let outDir: string;
let profile: string;
let http: Server;
let pageUrl: string;
let node: LanemuxNode;
let ctx: BrowserContext;
let prompts: string[] = [];

function mockModel(): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    doStream: async () => {
      const parts = [
        { type: 'stream-start' as const, warnings: [] },
        { type: 'text-start' as const, id: 't' },
        ...WORDS.map((delta) => ({ type: 'text-delta' as const, id: 't', delta })),
        { type: 'text-end' as const, id: 't' },
        {
          type: 'finish' as const,
          finishReason: { unified: 'stop' as const, raw: 'stop' },
          usage: {
            inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
            outputTokens: { total: WORDS.length, text: WORDS.length, reasoning: 0 },
          },
        },
      ];
      return { stream: new ReadableStream({ start: (c) => (parts.forEach((p) => c.enqueue(p)), c.close()) }) };
    },
  });
}

beforeAll(async () => {
  outDir = scratchDir('lanemux-ai-page-');
  await build({
    configFile: false,
    root: join(import.meta.dirname, 'ai-page'),
    base: './',
    logLevel: 'silent',
    build: { outDir, emptyOutDir: true, target: 'es2022', minify: false },
  });
  http = createServer((req, res) => {
    const rel = normalize(new URL(req.url ?? '/', 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
    try {
      const body = readFileSync(join(outDir, rel));
      res.writeHead(200, { 'content-type': extname(rel) === '.js' ? 'text/javascript' : 'text/html' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  pageUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  node = await createNode({ transports: [webSocketServerTransport({ port: 0 })], resume: { history: true } });
  serveChat(node, async ({ messages }, { signal }) => {
    prompts.push(messages.map((m) => m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')).join('|'));
    return streamText({ model: mockModel(), messages: await convertToModelMessages(messages), abortSignal: signal });
  });
  profile = scratchDir('lanemux-ai-chromium-');
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
  });
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  await node?.close();
  await new Promise<void>((r) => (http ? http.close(() => r()) : r()));
  for (const d of [outDir, profile]) if (d) rmSync(d, { recursive: true, force: true });
});

describe('AI SDK useChat in Chromium over lanemux', () => {
  it('a React page sends a message with useChat and renders the streamed answer exactly', async () => {
    prompts = [];
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${pageUrl}?server=${encodeURIComponent(node.address)}`);
    await page.waitForFunction(() => document.body.dataset['ready'] === '1', null, { timeout: 20_000 });
    await page.fill('#input', 'tell me everything');
    await page.click('#send');
    await page.waitForFunction(
      () =>
        document.getElementById('status')?.textContent === 'ready' &&
        document.querySelector('#messages li[data-role="assistant"]') !== null,
      null,
      { timeout: 20_000, polling: 50 },
    );
    const assistant = await page.textContent('#messages li[data-role="assistant"]');
    expect(assistant).toBe(WORDS.join(''));
    expect(await page.textContent('#messages li[data-role="user"]')).toBe('tell me everything');
    expect(prompts).toEqual(['tell me everything']);
    expect(errors).toEqual([]);
    // The answer's stream ended and released its slot on the server.
    expect(node.metrics()['velo_streaming_mux_live_slots']).toBe(0);
  }, 60_000);
});
