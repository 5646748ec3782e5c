/**
 * The `lanemux/client` page: everything it uses comes from src/client.ts, the entry a browser page
 * imports (`connect`, no node). It calls the server's served methods with `client.stream`, reads, and
 * cancels; the test drives it through `window.e2e` (see {@link ClientPage}).
 */
import { connect, isLanemuxError } from '../../src/client.ts';
import type { Client, ClientStream } from '../../src/client.ts';
import type { CallResult, ClientPage } from './api.ts';

let client: Client | null = null;
const open = new Map<string, ClientStream<unknown>>();

function connected(): Client {
  if (client === null) throw new Error('not connected');
  return client;
}

async function readAll(call: ClientStream<unknown>, items: unknown[] = []): Promise<CallResult> {
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
    client = await connect(url);
    document.getElementById('status')!.textContent = `connected to ${client.server}`;
    return client.server;
  },
  call(method, request) {
    return readAll(connected().stream(method, request));
  },
  async callAndRead(id, method, request, n) {
    const call = connected().stream(method, request);
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
  },
};
// Not `declare global`: e2e/page declares `window.e2e` with its own API, and both pages are type-checked together.
(window as unknown as { e2e: ClientPage }).e2e = api;
document.getElementById('status')!.textContent = 'idle';
