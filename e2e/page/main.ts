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
import { webTransportClientTransport, type WebTransportHashSource } from '../../src/adapters/webtransport.ts';
import { RESUME_KEY } from '../../src/stream/resume-options.ts';
import { GENERATE_HANDLER, checkOrder } from '../support/protocol.ts';
import type { GenerateReply, GenerateRequest } from '../support/protocol.ts';
import type {
  ConnectOptions,
  E2ePage,
  ErrorInfo,
  GenerateOptions,
  ManySummary,
  ReattachDriverOptions,
  ReattachResult,
  Recovery,
  StreamResult,
} from './api.ts';

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
/** The link's losses and returns, in order, on the page's clock. */
const linkEvents: Array<{ kind: 'down' | 'up'; at: number; wall: number }> = [];
/** When the link last came back (the first connect included). */
let lastUpAt = 0;

/** What the page keeps of a stream in `sessionStorage` to take it up again after a reload. */
interface Saved {
  readonly id: string;
  readonly prompt: string;
  /** The server's resume token (null until its reply to `generate` arrived). */
  token: string | null;
  /** The tokens rendered so far (the re-attach offset is their count). */
  tokens: string[];
}

const SAVE_PREFIX = 'lanemux-e2e:';

// Written synchronously after each token is rendered: what survives a reload is exactly what the DOM showed.
function save(s: Saved): void {
  sessionStorage.setItem(SAVE_PREFIX + s.prompt, JSON.stringify(s));
}

/** What the `serverCertificateHashes` function returned, hex, one per call. */
const certHashCalls: string[] = [];

function webTransportAdapter(options: ConnectOptions): TransportAdapter {
  const url = options.certHashUrl;
  const hashes: WebTransportHashSource =
    url !== undefined
      ? // A development server's current hash, asked again before each (re)connect: a restarted server has a new one.
        async () => {
          const hex = (await (await fetch(url, { cache: 'no-store' })).text()).trim();
          certHashCalls.push(hex);
          return [{ algorithm: 'sha-256', value: hexBytes(hex) }];
        }
      : options.certHashHex === undefined
        ? []
        : [{ algorithm: 'sha-256', value: hexBytes(options.certHashHex) }];
  return webTransportClientTransport({ serverCertificateHashes: hashes, ...(options.transportOptions ?? {}) });
}

function hexBytes(hex: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(new ArrayBuffer(hex.length / 2));
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function errorInfo(e: unknown): ErrorInfo {
  if (isLanemuxError(e)) {
    const reason = (e as { reason?: unknown }).reason;
    return {
      code: e.code,
      retryable: e.retryable,
      message: e.message,
      ...(typeof reason === 'string' ? { reason } : {}),
    };
  }
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
    // A node given its messenger resumes only if that messenger advertises the resume key.
    transportKeys: options.resume === undefined ? [MESSENGER_MUX_KEY] : [MESSENGER_MUX_KEY, RESUME_KEY],
    healthCheck: options.healthCheck ?? false,
  });
  messenger.onPeerState?.((e) => {
    if (e.type === 'down') linkEvents.push({ kind: 'down', at: performance.now(), wall: Date.now() });
    else if (e.type === 'up' || e.type === 'resumed') {
      lastUpAt = performance.now();
      linkEvents.push({ kind: 'up', at: lastUpAt, wall: Date.now() });
    }
  });
  const mux: MuxConfig = options.mux ?? {};
  node = await createNode({ messenger, mux, ...(options.resume !== undefined ? { resume: options.resume } : {}) });
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
  saved: Saved | null = null,
): Promise<void> {
  const onToken = (token: string): void => {
    const now = performance.now();
    if (!(result.flowingAt !== null && result.flowingAt > lastUpAt)) result.flowingAt = now;
    if (result.firstTokenMs === null) result.firstTokenMs = now - result.startMs;
    result.tokens.push(token);
    row?.appendData(token);
    if (saved !== null) save(saved);
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
    flowingAt: null,
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
  const saved: Saved | null = options.persist === true ? { id, prompt, token: null, tokens: result.tokens } : null;
  const ended = read ? readStream(anchor, result, row, options.reader ?? 'iterator', saved) : Promise.resolve();
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
    const reply = (await messenger!.request(serverPeer(), GENERATE_HANDLER, body, {
      timeoutMs: 10_000,
    })) as GenerateReply;
    result.repliedMs = performance.now() - result.startMs;
    if (saved !== null) {
      saved.token = reply.resumeToken;
      save(saved);
    }
  } catch (e) {
    result.requestError = errorInfo(e);
    anchor.cancel();
  }
  return id;
}

/** See {@link E2ePage.reattach}. */
async function reattachSaved(prompt: string, options: ReattachDriverOptions = {}): Promise<ReattachResult> {
  const raw = sessionStorage.getItem(SAVE_PREFIX + prompt);
  if (raw === null) throw new Error(`nothing saved for ${prompt}`);
  const saved = JSON.parse(raw) as Saved;
  if (saved.token === null) throw new Error(`no resume token saved for ${prompt}`);
  const token =
    options.tamper === true ? saved.token.slice(0, -1) + (saved.token.endsWith('0') ? '1' : '0') : saved.token;
  const offset = saved.tokens.length;
  let anchor: StreamAnchor<string>;
  try {
    anchor = await node!.reattach<string>(serverPeer(), token, { offset });
  } catch (e) {
    return { id: saved.id, offset, error: errorInfo(e) };
  }
  const id = saved.id;
  nextId = Math.max(nextId, Number(id) + 1);
  const result: StreamResult = {
    id,
    prompt,
    tokens: saved.tokens,
    startMs: performance.now(),
    firstTokenMs: null,
    repliedMs: null,
    flowingAt: null,
    endMs: null,
    end: null,
    error: null,
    orderOk: false,
    mainCount: 0,
    tailCount: 0,
    cancelled: false,
    requestError: null,
  };
  // The same element as before the reload, showing what was rendered then; the rest appends to it.
  const row = document.getElementById(`s-${id}`)?.firstChild ?? render(id, prompt, true)!;
  if (!(row instanceof Text)) throw new Error(`#s-${id} holds no text node`);
  row.data = saved.tokens.join('');
  const ended = readStream(anchor, result, row, 'iterator', saved);
  streams.set(id, { anchor, result, row, ended });
  return { id, offset, error: null };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function startMany(count: number, options: GenerateOptions): Promise<string[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) => generate({ ...options, prompt: `${options.prompt ?? 'm'}${i}` })),
  );
}

async function generateMany(count: number, options: GenerateOptions): Promise<ManySummary> {
  return waitMany(await startMany(count, options), options.n);
}

async function waitMany(ids: string[], n?: number): Promise<ManySummary> {
  await Promise.all(ids.map((id) => get(id).ended));
  const rs = ids.map((id) => get(id).result);
  const exact = (r: StreamResult): boolean => r.orderOk && (n === undefined || r.mainCount === n) && r.tailCount === 0;
  const t0 = Math.min(...rs.map((r) => r.startMs));
  const wallMs = Math.max(...rs.map((r) => r.startMs + (r.endMs ?? 0))) - t0;
  const tokens = rs.reduce((a, r) => a + r.tokens.length, 0);
  const ttft = rs.map((r) => r.firstTokenMs ?? Infinity).sort((a, b) => a - b);
  return {
    ids,
    streams: ids.length,
    tokens,
    wallMs,
    tokensPerSecond: (tokens / wallMs) * 1000,
    ttftP50Ms: percentile(ttft, 50),
    ttftP99Ms: percentile(ttft, 99),
    replyP50Ms: percentile(
      rs.map((r) => r.repliedMs ?? Infinity).sort((a, b) => a - b),
      50,
    ),
    allOrdered: rs.every(exact),
    allFinalized: rs.every((r) => r.end === 'finalized'),
    mainCounts: rs.map((r) => r.mainCount),
    badStreams: rs
      .filter((r) => !(exact(r) && r.end === 'finalized'))
      .map((r) => ({ id: r.id, end: r.end, tokens: r.tokens.length, error: r.error }))
      .slice(0, 5),
  };
}

const tick = (): Promise<void> => new Promise((f) => setTimeout(f, 5));

/** See {@link E2ePage.waitFlowing}. */
async function waitFlowing(ids: string[], downs: number, timeoutMs: number): Promise<Recovery> {
  const deadline = performance.now() + timeoutMs;
  const late = (what: string): Error => new Error(`after loss ${downs + 1}: ${what} within ${timeoutMs} ms`);
  let down = -1;
  while ((down = nthDown(downs)) < 0) {
    if (performance.now() > deadline) throw late('the page saw no lost link');
    await tick();
  }
  const { at: downAt, wall: downWallMs } = linkEvents[down]!;
  let upAt: number | undefined;
  while ((upAt = linkEvents.slice(down + 1).find((e) => e.kind === 'up')?.at) === undefined) {
    if (performance.now() > deadline) throw late('the link did not come back');
    await tick();
  }
  const rs = ids.map((id) => get(id).result);
  const open = rs.filter((r) => r.end === null).length;
  // A token after the link came back: the stream was resumed (the old link's records were read long before).
  const flowing = (r: StreamResult): boolean => r.flowingAt !== null && r.flowingAt > upAt!;
  while (!rs.every((r) => r.end !== null || flowing(r))) {
    if (performance.now() > deadline) {
      const stuck = rs.filter((r) => r.end === null && !flowing(r)).map((r) => r.id);
      throw late(`${stuck.length} streams got no token (${stuck.slice(0, 5).join(', ')}…)`);
    }
    await tick();
  }
  const flowingAt = Math.max(upAt, ...rs.filter(flowing).map((r) => r.flowingAt!));
  return { downWallMs, linkBackMs: upAt - downAt, allFlowingMs: flowingAt - downAt, open };
}

/** Index in `linkEvents` of the (n+1)-th loss, or -1. */
function nthDown(n: number): number {
  let seen = 0;
  for (let i = 0; i < linkEvents.length; i++) if (linkEvents[i]!.kind === 'down' && seen++ === n) return i;
  return -1;
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
  reattach: reattachSaved,
  result: (id) => snapshot(id),
  tokenCount: (id) => get(id).result.tokens.length,
  startMany,
  waitMany,
  openCount: (ids) => ids.filter((id) => get(id).result.end === null).length,
  linkState: () => ({
    downs: linkEvents.filter((e) => e.kind === 'down').length,
    ups: linkEvents.filter((e) => e.kind === 'up').length,
  }),
  waitFlowing,
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
  stopMany(ids) {
    for (const id of ids) get(id).anchor.requestStop();
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
  certHashCalls: () => [...certHashCalls],
  async close() {
    await node?.close();
    await messenger?.close();
    node = null;
    messenger = null;
  },
};
document.getElementById('status')!.textContent = 'idle';
