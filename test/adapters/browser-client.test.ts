// The browser client adapter (WebTransport first, WebSocket when it must) on scripted WebTransport and
// WebSocket constructors, no network: which transport each (re)connect uses, how long a page stays on
// WebSocket after a fallback, the certificate-hash function called before every WebTransport session,
// and every way the dial ends for good reaching the application (DialEvents.fail → onDialEnded).
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  browserClientTransport,
  type BrowserClientTransport,
  type BrowserClientTransportOptions,
  type TransportInUseEvent,
} from '../../src/adapters/browser-client.ts';
import type { WebTransportHash, WebTransportInit, WebTransportSession } from '../../src/adapters/webtransport.ts';
import type { WtBidiStream } from '../../src/adapters/webtransport-stream.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import type { LanemuxError } from '../../src/errors.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { DialEndedEvent, Messenger } from '../../src/messenger/types.ts';
import { systemRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { Connection, DialHandle, DialRequest } from '../../src/transport/port.ts';
import { waitFor } from '../support/wait-for.ts';

const ADDRESS = 'https://127.0.0.1:4433/lanemux';
const WS_URL = 'ws://127.0.0.1:8080/lanemux';
const FAST = { minReconnectionDelay: 1, reconnectionJitter: 0, maxReconnectionDelay: 2 } as const;

/** The system runtime with a clock the test can move forward (timers stay real: partysocket's are). */
function skewedRuntime(): Runtime & { skew: number } {
  const base = systemRuntime();
  const rt = {
    skew: 0,
    now: () => base.now() + rt.skew,
    setTimer: base.setTimer,
    clearTimer: base.clearTimer,
    macrotask: base.macrotask,
    randomBytes: base.randomBytes,
    env: base.env,
  };
  return rt;
}

/** The system runtime, keeping count of the timers set on it and not yet fired or cleared. */
function trackingRuntime(): Runtime & { pending: Set<unknown> } {
  const base = systemRuntime();
  const pending = new Set<unknown>();
  return {
    ...base,
    pending,
    setTimer(fn, ms, keep) {
      const h: unknown = base.setTimer(
        () => {
          pending.delete(h);
          fn();
        },
        ms,
        keep,
      );
      pending.add(h);
      return h;
    },
    clearTimer(h) {
      pending.delete(h);
      base.clearTimer(h);
    },
  };
}

/** `[u32 BE length][bytes]`: one message as a WebTransport lane carries it. */
function framed(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + bytes.byteLength);
  new DataView(out.buffer).setUint32(0, bytes.byteLength);
  out.set(bytes, 4);
  return out;
}

/**
 * A scripted WebTransport: session n becomes ready (`'ok'`), never settles (`'hang'`), or fails with
 * the given message; past the script, `fallback` applies. An open session's stream can carry a message
 * from the "server" (`say`) and be lost (`drop`).
 */
function fakeWebTransport(script: string[] = [], fallback = 'ok') {
  const sessions: Array<{ init: WebTransportInit | undefined; say(): void; drop(): void }> = [];
  class FakeWebTransport implements WebTransportSession {
    readonly ready: Promise<unknown>;
    readonly closed: Promise<unknown>;
    #readers: ReadableStreamDefaultController<Uint8Array>[] = [];
    constructor(_url: string, init?: WebTransportInit) {
      const outcome = script[sessions.length] ?? fallback;
      sessions.push({
        init,
        say: () => {
          for (const c of this.#readers) c.enqueue(framed(Uint8Array.of(1, 2, 3)));
        },
        drop: () => {
          for (const c of this.#readers) c.error(new Error('session lost'));
        },
      });
      this.ready =
        outcome === 'ok'
          ? Promise.resolve()
          : outcome === 'hang'
            ? new Promise(() => {})
            : Promise.reject(new Error(outcome));
      this.closed = outcome === 'ok' || outcome === 'hang' ? new Promise(() => {}) : Promise.reject(new Error(outcome));
      this.ready.catch(() => {});
      this.closed.catch(() => {});
    }
    createBidirectionalStream(): Promise<WtBidiStream> {
      return Promise.resolve({
        readable: new ReadableStream<Uint8Array>({ start: (c) => void this.#readers.push(c) }),
        writable: new WritableStream<Uint8Array>(),
      });
    }
    close(): void {}
  }
  return { ctor: FakeWebTransport, sessions };
}

/**
 * A scripted WHATWG WebSocket (what partysocket wraps): socket n opens (`'ok'`) or is refused
 * (`'refuse'`: error, then close 1006); past the script, `fallback` applies. An open socket can carry
 * a message from the "server" (`say`) and be closed by it (`drop`).
 */
function fakeWebSocket(script: string[] = [], fallback = 'ok') {
  const sockets: Array<{ url: string; say(): void; drop(code?: number): void }> = [];
  class FakeWebSocket extends EventTarget {
    static readonly CONNECTING = 0;
    static readonly OPEN = 1;
    static readonly CLOSING = 2;
    static readonly CLOSED = 3;
    readyState = 0;
    binaryType = 'blob';
    bufferedAmount = 0;
    readonly protocol = '';
    readonly extensions = '';
    readonly url: string;
    constructor(url: string) {
      super();
      this.url = url;
      const outcome = script[sockets.length] ?? fallback;
      sockets.push({
        url,
        say: () => this.dispatchEvent(new MessageEvent('message', { data: Uint8Array.of(1, 2, 3).buffer })),
        drop: (code = 1006) => this.#closed(code),
      });
      setTimeout(() => {
        if (outcome === 'ok') {
          this.readyState = 1;
          this.dispatchEvent(new Event('open'));
          return;
        }
        this.dispatchEvent(Object.assign(new Event('error'), { error: new Error('connect ECONNREFUSED') }));
        this.#closed(1006);
      }, 1);
    }
    send(): void {}
    close(code = 1000, reason = ''): void {
      this.#closed(code, reason);
    }
    #closed(code: number, reason = ''): void {
      if (this.readyState === 3) return;
      this.readyState = 3;
      this.dispatchEvent(Object.assign(new Event('close'), { code, reason, wasClean: false }));
    }
  }
  return { ctor: FakeWebSocket, sockets };
}

/** One lane-0 dial of `adapter` as the transport core makes it, recording what it reports. */
function dialLane0(adapter: BrowserClientTransport, runtime: Runtime = systemRuntime(), reconnect = true) {
  const opened: Connection[] = [];
  const closed: LanemuxError[] = [];
  const failed: LanemuxError[] = [];
  const request: DialRequest = {
    address: ADDRESS,
    lane: 0,
    frameLimit: 4096,
    maxMessageSize: 1 << 20,
    reconnect,
    runtime,
  };
  const handle: DialHandle = adapter.dial(request, {
    open: (conn) => {
      opened.push(conn);
      conn.start({ message() {}, closed: (e) => void closed.push(e) });
    },
    fail: (e) => void failed.push(e),
  });
  return { opened, closed, failed, handle };
}

const adapters: BrowserClientTransport[] = [];
const messengers: Messenger[] = [];
afterEach(async () => {
  await Promise.all(messengers.splice(0).map((m) => m.close()));
  await Promise.all(adapters.splice(0).map((a) => a.close()));
});

function make(
  options: Omit<BrowserClientTransportOptions, 'webSocket'> & {
    webSocket?: BrowserClientTransportOptions['webSocket'];
  },
  ws = fakeWebSocket(),
) {
  const events: TransportInUseEvent[] = [];
  const adapter = browserClientTransport({
    ...FAST,
    onTransport: (e) => events.push(e),
    ...options,
    webSocket: options.webSocket ?? { url: WS_URL, WebSocket: ws.ctor as never },
  });
  adapters.push(adapter);
  return { adapter, events, ws };
}

describe('browser client: which transport a connect uses', () => {
  it('a page without WebTransport goes straight to WebSocket, and says so', async () => {
    expect((globalThis as { WebTransport?: unknown }).WebTransport).toBeUndefined();
    const { adapter, events, ws } = make({});
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the WebSocket connection');
    expect(ws.sockets.map((s) => s.url)).toEqual([WS_URL]);
    expect(adapter.transportInUse).toBeUndefined();
    ws.sockets[0]!.say();
    expect(adapter.transportInUse).toBe('websocket');
    expect(events).toEqual([
      { transport: 'websocket', address: ADDRESS, url: WS_URL, reason: 'this page has no WebTransport' },
    ]);
  });

  it('WebTransport that works is used, and WebSocket is never dialled', async () => {
    const wt = fakeWebTransport();
    const { adapter, events, ws } = make({ webTransport: { WebTransport: wt.ctor } });
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the WebTransport connection');
    wt.sessions[0]!.say();
    await waitFor(() => adapter.transportInUse !== undefined, 2_000, 'the first message');
    expect(adapter.transportInUse).toBe('webtransport');
    expect(events).toEqual([{ transport: 'webtransport', address: ADDRESS, url: ADDRESS, reason: undefined }]);
    expect(ws.sockets).toHaveLength(0);
  });

  it('a WebTransport session that fails to open falls back to WebSocket in the same connect', async () => {
    const wt = fakeWebTransport(['WebTransportError: Opening handshake failed.']);
    const { adapter, events, ws } = make({ webTransport: { WebTransport: wt.ctor } });
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the WebSocket connection');
    expect(wt.sessions).toHaveLength(1);
    expect(ws.sockets).toHaveLength(1);
    ws.sockets[0]!.say();
    expect(adapter.transportInUse).toBe('websocket');
    expect(events).toHaveLength(1);
    expect(events[0]!.transport).toBe('websocket');
    expect(events[0]!.reason).toContain('Opening handshake failed.');
    expect(d.failed).toEqual([]);
  });

  it('a WebTransport session that never becomes ready falls back after webTransport.connectTimeoutMs (default 4 s)', async () => {
    const wt = fakeWebTransport(['hang']);
    const rt = skewedRuntime();
    const timers: number[] = [];
    // Record the deadlines the adapter sets; run them at once (the session hangs forever otherwise).
    const fastRt: Runtime = {
      ...rt,
      setTimer: (fn, ms, keep) => {
        timers.push(ms);
        return rt.setTimer(fn, ms === 4_000 ? 1 : ms, keep);
      },
    };
    const { adapter, ws } = make({ webTransport: { WebTransport: wt.ctor } });
    const d = dialLane0(adapter, fastRt);
    await waitFor(() => d.opened.length === 1, 2_000, 'the WebSocket connection');
    expect(timers).toContain(4_000);
    expect(wt.sessions).toHaveLength(1);
    ws.sockets[0]!.say();
    expect(adapter.transportInUse).toBe('websocket');
  });

  it('WebTransport already in use: a reconnect retries it maxWebTransportFailures (3) times before trying WebSocket', async () => {
    const wt = fakeWebTransport(['ok', 'down', 'down', 'down']);
    const { adapter, events, ws } = make({ webTransport: { WebTransport: wt.ctor } });
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the first connection');
    wt.sessions[0]!.say();
    wt.sessions[0]!.drop();
    await waitFor(() => d.opened.length === 2, 2_000, 'the reconnect');
    // Three WebTransport attempts failed (a server restarting), then WebSocket took over.
    expect(wt.sessions).toHaveLength(4);
    expect(ws.sockets).toHaveLength(1);
    ws.sockets[0]!.say();
    expect(events.map((e) => e.transport)).toEqual(['webtransport', 'websocket']);
    expect(d.failed).toEqual([]);
  });

  it('after a fallback the page stays on WebSocket, and tries WebTransport again once webTransportRetryMs (5 min) passed', async () => {
    const wt = fakeWebTransport(['refused'], 'ok');
    const rt = skewedRuntime();
    const { adapter, events, ws } = make({ webTransport: { WebTransport: wt.ctor } });
    const d = dialLane0(adapter, rt);
    await waitFor(() => d.opened.length === 1, 2_000, 'the fallback connection');
    ws.sockets[0]!.say();
    // Lost: the reconnect stays on WebSocket (no new WebTransport session).
    ws.sockets[0]!.drop();
    await waitFor(() => d.opened.length === 2, 2_000, 'the first reconnect');
    expect(wt.sessions).toHaveLength(1);
    expect(ws.sockets).toHaveLength(2);
    ws.sockets[1]!.say();
    rt.skew += 299_000;
    ws.sockets[1]!.drop();
    await waitFor(() => d.opened.length === 3, 2_000, 'the second reconnect');
    expect(wt.sessions).toHaveLength(1);
    ws.sockets[2]!.say();
    // Five minutes after the fallback: the next reconnect tries WebTransport first, and it works now.
    rt.skew += 1_000;
    ws.sockets[2]!.drop();
    await waitFor(() => d.opened.length === 4, 2_000, 'the third reconnect');
    expect(wt.sessions).toHaveLength(2);
    expect(ws.sockets).toHaveLength(3);
    wt.sessions[1]!.say();
    await waitFor(() => adapter.transportInUse === 'webtransport', 2_000, 'the answer over WebTransport');
    expect(events.map((e) => e.transport)).toEqual(['websocket', 'webtransport']);
  });

  it('the lanes 1..L-1 of a link use the transport its lane 0 uses', async () => {
    const wt = fakeWebTransport(['refused']);
    const { adapter, ws } = make({ webTransport: { WebTransport: wt.ctor } });
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'lane 0');
    ws.sockets[0]!.say();
    const lane1: Connection[] = [];
    adapter.dial(
      {
        address: ADDRESS,
        lane: 1,
        frameLimit: 4096,
        maxMessageSize: 1 << 20,
        reconnect: false,
        runtime: systemRuntime(),
      },
      { open: (c) => void lane1.push(c), fail: () => {} },
    );
    await waitFor(() => lane1.length === 1, 2_000, 'lane 1');
    expect(ws.sockets.map((s) => s.url)).toEqual([WS_URL, WS_URL]);
    expect(wt.sessions).toHaveLength(1);
  });

  it('webSocket.url may be a function of the dialled address', async () => {
    const ws = fakeWebSocket();
    const { adapter } = make({
      webSocket: { url: (a) => a.replace('https://', 'wss://').replace(':4433', ':8443'), WebSocket: ws.ctor as never },
    });
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the WebSocket connection');
    expect(ws.sockets[0]!.url).toBe('wss://127.0.0.1:8443/lanemux');
  });
});

describe('browser client: certificate hashes', () => {
  it('a serverCertificateHashes function is called before every WebTransport session, each session using its answer then', async () => {
    const wt = fakeWebTransport();
    let calls = 0;
    const hashes = (): WebTransportHash[] => [{ algorithm: 'sha-256', value: new Uint8Array(32).fill(++calls) }];
    const { adapter } = make({ webTransport: { WebTransport: wt.ctor, serverCertificateHashes: hashes } });
    const d = dialLane0(adapter);
    for (let n = 1; n <= 3; n++) {
      await waitFor(() => d.opened.length === n, 2_000, `connection ${n}`);
      wt.sessions[n - 1]!.say();
      if (n < 3) wt.sessions[n - 1]!.drop();
    }
    expect(calls).toBe(3);
    expect(
      wt.sessions.map((s) => (s.init?.serverCertificateHashes?.[0]?.value as Uint8Array | undefined)?.[0]),
    ).toEqual([1, 2, 3]);
  });

  it('an async one that resolves later still feeds the session it was called for', async () => {
    const wt = fakeWebTransport();
    const value = new Uint8Array(32).fill(9);
    const { adapter } = make({
      webTransport: {
        WebTransport: wt.ctor,
        serverCertificateHashes: async () => {
          await new Promise((r) => setTimeout(r, 5));
          return [{ algorithm: 'sha-256', value }];
        },
      },
    });
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the connection');
    expect(wt.sessions[0]!.init?.serverCertificateHashes?.[0]?.value).toEqual(value);
  });
});

describe('browser client: a dial that ends for good is reported, never retried silently', () => {
  it('a first connect on which both transports fail fails at once with ERR_CONNECT naming both', async () => {
    const wt = fakeWebTransport(['WebTransportError: Opening handshake failed.']);
    const ws = fakeWebSocket(['refuse']);
    const { adapter } = make({ webTransport: { WebTransport: wt.ctor } }, ws);
    const d = dialLane0(adapter);
    await waitFor(() => d.failed.length === 1, 2_000, 'the dial failure');
    expect(d.failed[0]!.code).toBe('ERR_CONNECT');
    expect(d.failed[0]!.message).toContain('Opening handshake failed.');
    expect(d.failed[0]!.message).toContain(WS_URL);
    expect(d.failed[0]!.message).toContain('connection refused');
    expect(d.opened).toEqual([]);
    expect([wt.sessions.length, ws.sockets.length]).toEqual([1, 1]);
  });

  it('a lost link that no reconnect can restore fails after maxRetries attempts, on both transports', async () => {
    const wt = fakeWebTransport(['refused'], 'refused');
    const ws = fakeWebSocket(['ok'], 'refuse');
    const { adapter } = make({ webTransport: { WebTransport: wt.ctor }, maxRetries: 3 }, ws);
    const rt = trackingRuntime();
    const d = dialLane0(adapter, rt);
    await waitFor(() => d.opened.length === 1, 2_000, 'the fallback connection');
    ws.sockets[0]!.say();
    ws.sockets[0]!.drop();
    await waitFor(() => d.failed.length === 1, 2_000, 'the dial failure');
    expect(d.failed[0]!.code).toBe('ERR_CONNECT');
    expect(d.failed[0]!.message).toContain('3 reconnect attempts in a row found no working transport; giving up');
    // Each reconnect tried WebSocket (the page had fallen back), then WebTransport once more.
    expect(ws.sockets).toHaveLength(1 + 3);
    expect(wt.sessions).toHaveLength(1 + 3);
    // Nothing is scheduled any more: no reconnect will follow.
    expect(rt.pending.size).toBe(0);
  });

  it('a connection the server closes before answering counts as a failed attempt, not a working link', async () => {
    const ws = fakeWebSocket();
    const { adapter } = make({}, ws);
    const d = dialLane0(adapter);
    await waitFor(() => d.opened.length === 1, 2_000, 'the connection');
    ws.sockets[0]!.drop(1011);
    await waitFor(() => d.failed.length === 1, 2_000, 'the dial failure');
    expect(d.failed[0]!.code).toBe('ERR_CONNECT');
    expect(ws.sockets).toHaveLength(1);
  });

  it('through the messenger: the connect rejects and onDialEnded carries the address and the error', async () => {
    const wt = fakeWebTransport(['WebTransportError: Opening handshake failed.']);
    const ws = fakeWebSocket(['refuse']);
    const { adapter } = make({ webTransport: { WebTransport: wt.ctor } }, ws);
    const m = await createMessenger({ transports: [adapter], healthCheck: false });
    messengers.push(m);
    const ended: DialEndedEvent[] = [];
    m.onDialEnded((e) => ended.push(e));
    await expect(m.connect(ADDRESS)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    await waitFor(() => ended.length === 1, 2_000, 'onDialEnded');
    expect(ended[0]).toMatchObject({ address: ADDRESS, code: 'ERR_CONNECT' });
    expect(ended[0]!.reason).toContain(WS_URL);
  });

  it('a terminal refusal by the server over the WebSocket fallback ends the dial once (real ws server, refused credential)', async () => {
    const server = await createMessenger({
      transports: [webSocketServerTransport({ port: 0, closeGraceMs: 100 })],
      authenticate: () => null,
      healthCheck: false,
    });
    messengers.push(server);
    const wt = fakeWebTransport([], 'WebTransportError: Opening handshake failed.');
    let sockets = 0;
    class CountingWebSocket extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols);
        sockets++;
      }
    }
    const adapter = browserClientTransport({
      ...FAST,
      webTransport: { WebTransport: wt.ctor },
      webSocket: { url: server.addresses[0]!, WebSocket: CountingWebSocket as never },
    });
    adapters.push(adapter);
    const client = await createMessenger({ transports: [adapter], healthCheck: false, credential: 'wrong' });
    messengers.push(client);
    const ended: DialEndedEvent[] = [];
    client.onDialEnded((e) => ended.push(e));
    await expect(client.connect(ADDRESS)).rejects.toMatchObject({ code: 'ERR_UNAUTHENTICATED' });
    await waitFor(() => ended.length === 1, 2_000, 'onDialEnded');
    expect(ended[0]).toMatchObject({ address: ADDRESS, code: 'ERR_UNAUTHENTICATED' });
    // The dial was stopped before it was reported (its back-off timer with it): one attempt per transport.
    expect(sockets).toBe(1);
    expect(wt.sessions).toHaveLength(1);
  });
});

describe('browser client: over a real WebSocket server', () => {
  it('WebTransport refused → the messenger links over WebSocket, requests work, transportInUse says websocket', async () => {
    const server = await createMessenger({
      transports: [webSocketServerTransport({ port: 0, closeGraceMs: 100 })],
      healthCheck: false,
      lanes: 2,
    });
    messengers.push(server);
    server.handle('echo', (_from, body) => body);
    const wt = fakeWebTransport(['WebTransportError: Opening handshake failed.']);
    const events: TransportInUseEvent[] = [];
    const adapter = browserClientTransport({
      webTransport: { WebTransport: wt.ctor },
      webSocket: { url: server.addresses[0]!, WebSocket: WebSocket as never },
      onTransport: (e) => events.push(e),
    });
    adapters.push(adapter);
    const client = await createMessenger({ transports: [adapter], healthCheck: false, lanes: 2 });
    messengers.push(client);
    const peer = await client.connect(ADDRESS);
    expect(peer.lanes).toBe(2);
    expect(adapter.transportInUse).toBe('websocket');
    expect(await client.request(peer.id, 'echo', 'over websocket')).toBe('over websocket');
    expect(events.map((e) => [e.transport, e.url])).toEqual([['websocket', server.addresses[0]]]);
  });

  it('refuses options without a WebSocket URL', () => {
    expect(() => browserClientTransport({ webSocket: { url: 'https://x' } })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    );
    expect(() => browserClientTransport({} as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }));
  });
});
