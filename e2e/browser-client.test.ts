// Real-browser end-to-end of `lanemux/client`: Debian Chromium (playwright-core) runs a vite-built page
// (e2e/client-page) that imports only src/client.ts — `connect`, over WebSocket —
// and calls methods a Node lanemux server serves (e2e/servers/node-ws-server.ts, `node.serve`).
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startE2e } from './support/harness.ts';
import type { E2eEnv } from './support/harness.ts';
import { startNodeWsServer } from './servers/node-ws-server.ts';
import type { NodeWsServer } from './servers/node-ws-server.ts';
import type { ClientPage } from './client-page/api.ts';

let env: E2eEnv;
const servers: NodeWsServer[] = [];
const pages: Page[] = [];

beforeAll(async () => {
  env = await startE2e(fileURLToPath(new URL('./client-page/', import.meta.url)));
}, 60_000);

afterEach(async () => {
  for (const p of pages.splice(0)) {
    await call(p, 'close').catch(() => {});
    await p.close();
  }
  for (const s of servers.splice(0)) await s.close();
  expect(env.pageErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await env?.close();
});

/** Call `window.e2e.<method>(...args)` in the page. */
function call<K extends keyof ClientPage>(
  page: Page,
  method: K,
  ...args: Parameters<ClientPage[K]>
): Promise<Awaited<ReturnType<ClientPage[K]>>> {
  return page.evaluate(
    ([m, a]) => {
      const api = (window as unknown as { e2e: Record<string, (...x: unknown[]) => unknown> }).e2e;
      return api[m]!(...a);
    },
    [method, args] as [string, unknown[]],
  ) as Promise<Awaited<ReturnType<ClientPage[K]>>>;
}

async function setup(): Promise<{ srv: NodeWsServer; page: Page }> {
  const srv = await startNodeWsServer();
  servers.push(srv);
  const page = await env.openPage();
  pages.push(page);
  const peer = await call(page, 'connect', srv.url);
  expect(peer).toBe(srv.node.workerId.toString(16).padStart(16, '0'));
  return { srv, page };
}

describe('lanemux/client in a browser (WebSocket, Node server)', () => {
  it("a page's client calls a served method and reads every item, in order", async () => {
    const { srv, page } = await setup();
    srv.node.serve<{ n: number }, string>('e2e.count', async (req, sender) => {
      for (let i = 0; i < req.n; i++) await sender.send(`tok${i}`);
    });
    const [a, b] = await Promise.all([
      call(page, 'call', 'e2e.count', { n: 300 }),
      call(page, 'call', 'e2e.count', { n: 0 }),
    ]);
    expect(a).toEqual({ items: Array.from({ length: 300 }, (_, i) => `tok${i}`), end: 'done' });
    expect(b).toEqual({ items: [], end: 'done' });
    // An unknown method is refused with its code.
    expect(await call(page, 'call', 'e2e.nope', {})).toEqual({ items: [], end: 'ERR_UNKNOWN_METHOD' });
  });

  it("cancelling a call in the page aborts the server handler's signal and frees the slots", async () => {
    const { srv, page } = await setup();
    let aborted!: () => void;
    const abortedNow = new Promise<void>((r) => (aborted = r));
    srv.node.serve('e2e.forever', async (_req, sender, { signal }) => {
      signal.addEventListener('abort', () => aborted(), { once: true });
      for (let i = 0; !signal.aborted; i++) await sender.send(i);
    });
    expect(await call(page, 'callAndRead', 'f', 'e2e.forever', {}, 5)).toEqual([0, 1, 2, 3, 4]);
    const after = await call(page, 'cancel', 'f');
    expect(after.end).toBe('done');
    await abortedNow;
    const deadline = performance.now() + 10_000;
    while ((await call(page, 'liveSlots')) !== 0 || srv.node.metrics()['velo_streaming_mux_live_slots'] !== 0) {
      if (performance.now() > deadline) throw new Error('slots not freed after the cancel');
      await new Promise((r) => setTimeout(r, 20));
    }
  });
});
