/**
 * The `lanemux/client` page: everything it uses comes from src/client.ts, the entry a browser page
 * imports (no `createNode`, no producer side). It calls the server's served methods with
 * `client.stream`, reads, and cancels; the test drives it through `window.e2e` (see {@link ClientPage}).
 */
import { createClient, isLanemuxError, webSocketClientTransport } from '../../src/client.ts';
import type { CallStream, LanemuxClient, PeerId } from '../../src/client.ts';
import type { CallResult, ClientPage } from './api.ts';

let client: LanemuxClient | null = null;
let server: PeerId | null = null;
const open = new Map<string, CallStream<unknown>>();

function connected(): { client: LanemuxClient; server: PeerId } {
  if (client === null || server === null) throw new Error('not connected');
  return { client, server };
}

async function readAll(call: CallStream<unknown>, items: unknown[] = []): Promise<CallResult> {
  try {
    for (;;) {
      const r = await call.next();
      if (r.done === true) return { items, end: 'done' };
      items.push(r.value);
    }
  } catch (e) {
    return { items, end: isLanemuxError(e) ? e.code : String(e) };
  }
}

const api: ClientPage = {
  async connect(url) {
    client = await createClient({ transports: [webSocketClientTransport()] });
    server = await client.connect(url);
    document.getElementById('status')!.textContent = `connected to ${server}`;
    return server;
  },
  call(method, request) {
    const c = connected();
    return readAll(c.client.stream(c.server, method, request));
  },
  async callAndRead(id, method, request, n) {
    const c = connected();
    const call = c.client.stream(c.server, method, request);
    open.set(id, call);
    const items: unknown[] = [];
    while (items.length < n) {
      const r = await call.next();
      if (r.done === true) break;
      items.push(r.value);
    }
    return items;
  },
  cancel(id) {
    const call = open.get(id);
    if (call === undefined) throw new Error(`no call ${id}`);
    open.delete(id);
    call.cancel();
    return readAll(call);
  },
  liveSlots: () => client?.metrics()['velo_streaming_mux_live_slots'] ?? 0,
  async close() {
    await client?.close();
    client = null;
    server = null;
  },
};
// Not `declare global`: e2e/page declares `window.e2e` with its own API, and both pages are type-checked together.
(window as unknown as { e2e: ClientPage }).e2e = api;
document.getElementById('status')!.textContent = 'idle';
