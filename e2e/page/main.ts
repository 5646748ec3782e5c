/**
 * The e2e page: a lanemux node in the browser that consumes token streams from a server.
 * For each request it creates an anchor, pre-binds it (zero-RTT ticket), sends `generate
 * {handle, ticket, prompt, n}` to the server, and renders the streamed tokens into the DOM while
 * checking their order. The test drives it through `window.e2e` (see {@link E2ePage}).
 */
import { createNode, isLanemuxError } from '../../src/index.ts';
import { MESSENGER_MUX_KEY } from '../../src/messenger/index.ts';
import type { LanemuxNode, MuxConfig, StreamAnchor } from '../../src/index.ts';
import { createMessenger } from '../../src/messenger/index.ts';
import type { Messenger } from '../../src/messenger/index.ts';
import type { TransportAdapter } from '../../src/transport/port.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webTransportClientTransport } from '../../src/adapters/webtransport.ts';
import { GENERATE_HANDLER, checkOrder } from '../support/protocol.ts';
import type { GenerateRequest } from '../support/protocol.ts';
import type { ConnectOptions, E2ePage, GenerateOptions, ManySummary, StreamResult } from './api.ts';

declare global {
  interface Window {
    e2e: E2ePage;
  }
}

let messenger: Messenger | null = null;
let node: LanemuxNode | null = null;
let nextId = 0;
const streams = new Map<
  string,
  { anchor: StreamAnchor<string>; result: StreamResult; row: Text | null; ended: Promise<void> }
>();
const container = document.getElementById('streams')!;

function webTransportAdapter(options: ConnectOptions): TransportAdapter {
  const hashes =
    options.certHashHex === undefined ? [] : [{ algorithm: 'sha-256' as const, value: hexBytes(options.certHashHex) }];
  return webTransportClientTransport({ serverCertificateHashes: hashes, ...(options.transportOptions ?? {}) });
}

function hexBytes(hex: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(new ArrayBuffer(hex.length / 2));
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function errorInfo(e: unknown): { code: string; retryable: boolean; message: string } {
  if (isLanemuxError(e)) return { code: e.code, retryable: e.retryable, message: e.message };
  return { code: 'NOT_LANEMUX', retryable: false, message: String(e) };
}

function serverPeer(): string {
  const peers = messenger?.peers() ?? [];
  const p = peers[0];
  if (p === undefined) throw new Error('not connected to the server');
  return p.id;
}

async function connect(options: ConnectOptions): Promise<{ workerId: string; peer: string }> {
  const transport =
    options.kind === 'wt'
      ? webTransportAdapter(options)
      : // Short reconnect delays: the restart scenario waits for partysocket's reconnect (defaults: 0.5–3 s).
        webSocketClientTransport({ minReconnectionDelay: 50, reconnectionJitter: 50, maxReconnectionDelay: 500 });
  messenger = await createMessenger({
    transports: [transport],
    transportKeys: [MESSENGER_MUX_KEY],
    healthCheck: false,
  });
  const mux: MuxConfig = options.mux ?? {};
  node = await createNode({ messenger, mux });
  const peer = await messenger.connect(options.url);
  const status = document.getElementById('status')!;
  status.textContent = `connected to ${peer.id}`;
  status.dataset['ready'] = 'true';
  return { workerId: node.workerId.toString(16).padStart(16, '0'), peer: peer.id };
}

/** Resolve once a server peer is connected (after a restart, partysocket's reconnect brings it back). */
async function waitPeer(timeoutMs: number): Promise<string> {
  const m = messenger!;
  const now = m.peers()[0];
  if (now !== undefined) return now.id;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no peer within ${timeoutMs} ms`));
    }, timeoutMs);
    const off = m.onPeer((p) => {
      clearTimeout(timer);
      off();
      resolve(p.id);
    });
  });
}

function render(id: string, prompt: string, show: boolean): Text | null {
  if (!show) return null;
  const div = document.createElement('div');
  div.className = 'stream';
  div.id = `s-${id}`;
  div.dataset['prompt'] = prompt;
  const text = document.createTextNode('');
  div.append(text);
  container.append(div);
  return text;
}

async function readStream(
  anchor: StreamAnchor<string>,
  result: StreamResult,
  row: Text | null,
  reader: 'iterator' | 'push',
): Promise<void> {
  const onToken = (token: string): void => {
    if (result.firstTokenMs === null) result.firstTokenMs = performance.now() - result.startMs;
    result.tokens.push(token);
    row?.appendData(token);
  };
  try {
    if (reader === 'push') {
      // Push mode: callbacks, no promise per token; `end` says how the stream ended.
      const error = await new Promise<unknown>((resolve) => anchor.consume({ item: onToken, end: resolve }));
      if (error !== null) throw error;
    } else {
      for await (const token of anchor) onToken(token);
    }
    result.end = result.cancelled ? 'cancelled' : 'finalized';
  } catch (e) {
    result.end = 'error';
    result.error = errorInfo(e);
  }
  result.endMs = performance.now() - result.startMs;
  const order = checkOrder(result.prompt, result.tokens);
  result.orderOk = order.ok;
  result.mainCount = order.main;
  result.tailCount = order.tail;
  if (row !== null) (row.parentElement as HTMLElement).dataset['end'] = result.end;
}

async function generate(options: GenerateOptions): Promise<string> {
  const n = node!;
  const id = String(nextId++);
  const prompt = options.prompt ?? `r${id}`;
  const anchor = n.createAnchor<string>();
  const ticket = n.prebindAnchor(anchor as StreamAnchor<unknown>);
  if (ticket === undefined) throw new Error('prebindAnchor gave no ticket (no mux?)');
  const result: StreamResult = {
    id,
    prompt,
    tokens: [],
    startMs: performance.now(),
    firstTokenMs: null,
    repliedMs: null,
    endMs: null,
    end: null,
    error: null,
    orderOk: false,
    mainCount: 0,
    tailCount: 0,
    cancelled: false,
    requestError: null,
  };
  const row = render(id, prompt, options.render ?? true);
  const read = options.read ?? true;
  const ended = read ? readStream(anchor, result, row, options.reader ?? 'iterator') : Promise.resolve();
  streams.set(id, { anchor, result, row, ended });
  const body: GenerateRequest = {
    handle: anchor.handle,
    ticket,
    prompt,
    n: options.n,
    delayMs: options.delayMs ?? 0,
    tail: options.tail ?? 0,
  };
  try {
    await messenger!.request(serverPeer(), GENERATE_HANDLER, body, { timeoutMs: 10_000 });
    result.repliedMs = performance.now() - result.startMs;
  } catch (e) {
    result.requestError = errorInfo(e);
    anchor.cancel();
  }
  return id;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function generateMany(count: number, options: GenerateOptions): Promise<ManySummary> {
  const t0 = performance.now();
  const ids = await Promise.all(
    Array.from({ length: count }, (_, i) => generate({ ...options, prompt: `${options.prompt ?? 'm'}${i}` })),
  );
  await Promise.all(ids.map((id) => streams.get(id)!.ended));
  const wallMs = performance.now() - t0;
  const rs = ids.map((id) => streams.get(id)!.result);
  const tokens = rs.reduce((a, r) => a + r.tokens.length, 0);
  const ttft = rs.map((r) => r.firstTokenMs ?? Infinity).sort((a, b) => a - b);
  return {
    ids,
    streams: count,
    tokens,
    wallMs,
    tokensPerSecond: (tokens / wallMs) * 1000,
    ttftP50Ms: percentile(ttft, 50),
    ttftP99Ms: percentile(ttft, 99),
    replyP50Ms: percentile(
      rs.map((r) => r.repliedMs ?? Infinity).sort((a, b) => a - b),
      50,
    ),
    allOrdered: rs.every((r) => r.orderOk && r.mainCount === options.n && r.tailCount === 0),
    allFinalized: rs.every((r) => r.end === 'finalized'),
    badStreams: rs
      .filter((r) => !(r.orderOk && r.mainCount === options.n && r.end === 'finalized'))
      .map((r) => ({ id: r.id, end: r.end, tokens: r.tokens.length, error: r.error }))
      .slice(0, 5),
  };
}

function get(id: string): { anchor: StreamAnchor<string>; result: StreamResult; ended: Promise<void> } {
  const s = streams.get(id);
  if (s === undefined) throw new Error(`no stream ${id}`);
  return s;
}

function snapshot(id: string): StreamResult {
  const r = get(id).result;
  return { ...r, tokens: [...r.tokens] };
}

window.e2e = {
  connect,
  waitPeer,
  generate,
  generateMany,
  result: (id) => snapshot(id),
  tokenCount: (id) => get(id).result.tokens.length,
  async waitEnd(id) {
    await get(id).ended;
    return snapshot(id);
  },
  async waitTokens(id, atLeast, timeoutMs) {
    const deadline = performance.now() + timeoutMs;
    const r = get(id).result;
    while (r.tokens.length < atLeast && r.end === null) {
      if (performance.now() > deadline)
        throw new Error(`stream ${id}: ${r.tokens.length} of ${atLeast} tokens after ${timeoutMs} ms`);
      await new Promise((f) => setTimeout(f, 5));
    }
    return r.tokens.length;
  },
  requestStop(id) {
    get(id).anchor.requestStop();
  },
  cancel(id) {
    const s = get(id);
    s.result.cancelled = true;
    s.anchor.cancel();
  },
  domText(id) {
    return document.getElementById(`s-${id}`)?.textContent ?? null;
  },
  metrics: () => node?.metrics() ?? {},
  async close() {
    await node?.close();
    await messenger?.close();
    node = null;
    messenger = null;
  },
};
document.getElementById('status')!.textContent = 'idle';
