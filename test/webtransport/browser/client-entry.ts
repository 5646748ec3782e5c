// Browser entry of client.test.ts (bundled by vite's dev server): `lanemux/client` (src/client.ts
// only) over `webTransportCarrier` or `browserCarrier`, on `globalThis.lanemuxClient` for playwright.
import {
  type Client,
  type ClientStream,
  type TransportEvent,
  browserCarrier,
  connect,
  isLanemuxError,
  webTransportCarrier,
} from '../../../src/client.ts';

export interface ClientConnect {
  /** The URL given to `connect`: the WebTransport one. */
  readonly url: string;
  /** SHA-256 of the server's development certificate, hex. */
  readonly hashHex: string;
  /** Set: `browserCarrier` with this WebSocket URL; unset: `webTransportCarrier`. */
  readonly wsUrl?: string;
  /** Delete `globalThis.WebTransport` first. */
  readonly deleteWebTransport?: boolean;
}

export interface ClientConnected {
  readonly server: string;
  readonly connectMs: number;
  readonly pageHasWebTransport: boolean;
}

export interface CallResult {
  readonly items: unknown[];
  readonly end: string;
}

export interface ClientApi {
  connect(o: ClientConnect): Promise<ClientConnected>;
  /** Start a call and read `n` items of it. */
  callAndRead(id: string, method: string, request: unknown, n: number): Promise<unknown[]>;
  /** Read a started call to its end. */
  readRest(id: string): Promise<CallResult>;
  /** Cancel a started call, then read it to its end. */
  cancel(id: string): Promise<CallResult>;
  /** What onTransport said, how often the hashes were asked for, how often the link went down. */
  state(): { events: TransportEvent[]; hashCalls: number; downs: number; liveSlots: number };
  close(): Promise<void>;
}

let client: Client | null = null;
const calls = new Map<string, ClientStream<unknown>>();
const events: TransportEvent[] = [];
let hashCalls = 0;
let downs = 0;

function hash(hex: string): { algorithm: 'sha-256'; value: Uint8Array<ArrayBuffer> } {
  const value = new Uint8Array(hex.length / 2);
  for (let i = 0; i < value.length; i++) value[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return { algorithm: 'sha-256', value };
}

function started(id: string): ClientStream<unknown> {
  const c = calls.get(id);
  if (c === undefined) throw new Error(`no call ${id}`);
  return c;
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

const api: ClientApi = {
  async connect(o) {
    if (o.deleteWebTransport) delete (globalThis as { WebTransport?: unknown }).WebTransport;
    const webTransport = {
      serverCertificateHashes: () => {
        hashCalls++;
        return [hash(o.hashHex)];
      },
    };
    const transport =
      o.wsUrl === undefined
        ? webTransportCarrier(webTransport)
        : browserCarrier({ webTransport, webSocketUrl: o.wsUrl, onTransport: (e) => events.push(e) });
    const t0 = performance.now();
    client = await connect(o.url, { transport, reconnectDelayMs: 50 });
    const connectMs = performance.now() - t0;
    client.onState((s) => {
      if (s === 'down') downs++;
    });
    return {
      server: client.server,
      connectMs,
      pageHasWebTransport: typeof (globalThis as { WebTransport?: unknown }).WebTransport === 'function',
    };
  },
  async callAndRead(id, method, request, n) {
    if (client === null) throw new Error('not connected');
    const call = client.stream(method, request);
    calls.set(id, call);
    const items: unknown[] = [];
    while (items.length < n) {
      const r = await call.next();
      if (r.done === true) break;
      items.push(r.value);
    }
    return items;
  },
  readRest: (id) => readAll(started(id)),
  cancel(id) {
    const call = started(id);
    call.cancel();
    return readAll(call);
  },
  state: () => ({
    events: [...events],
    hashCalls,
    downs,
    liveSlots: client?.metrics()['velo_streaming_mux_live_slots'] ?? 0,
  }),
  async close() {
    await client?.close();
    client = null;
  },
};
(globalThis as { lanemuxClient?: ClientApi }).lanemuxClient = api;
