/**
 * The playground page: the consumer side. It dials the engine with one connection, creates anchors
 * (the consumer ends of streams), pre-binds them for zero-RTT opening and hands each handle + ticket
 * to the engine in a `playground.generate` request; then it reads every anchor with `for await` and
 * draws what the engine reports (`playground.metrics`, 4×/s) next to its own view of credit.
 *
 * An application would import from `lanemux` and `lanemux/transport/websocket`; the playground imports
 * the sources so vite serves them without a build.
 */
import { createNode } from '../src/index.ts';
import { MESSENGER_MUX_KEY } from '../src/messenger/index.ts';
import type { LanemuxNode, StreamAnchor } from '../src/index.ts';
import { createMessenger } from '../src/messenger/index.ts';
import type { Messenger } from '../src/messenger/index.ts';
import type { TransportAdapter } from '../src/transport/port.ts';
import { webSocketClientTransport } from '../src/adapters/websocket.ts';
import { Series, drawBars, drawCreditGrid, drawLines } from './charts.ts';
import type { EngineInfo, EngineReport } from './protocol.ts';

// ───────────────────────── page elements ─────────────────────────

const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`missing #${id}`);
  return el as T;
};
const form = $<HTMLFormElement>('form');
const startButton = $<HTMLButtonElement>('start');
const stopButton = $<HTMLButtonElement>('stop');
const statusText = $('status');
const statusDot = $('status-dot');
const liveTokens = $('live-tokens');

interface Settings {
  readonly flush: 'auto' | 'manual';
  readonly credit: number;
  readonly lanes: number;
  readonly streams: number;
  readonly rate: number;
  readonly tokens: number;
  readonly reader: number;
  /** Side by side: also run the same streams over one plain WebSocket each. */
  readonly compare: boolean;
}

function readSettings(): Settings {
  const data = new FormData(form);
  const num = (name: string): number => Number(data.get(name));
  return {
    flush: data.get('flush') === 'manual' ? 'manual' : 'auto',
    credit: num('credit'),
    lanes: num('lanes'),
    streams: num('streams'),
    rate: num('rate'),
    tokens: num('tokens'),
    reader: num('reader'),
    compare: data.get('compare') === 'on',
  };
}

for (const name of ['streams', 'rate', 'tokens']) {
  const input = form.elements.namedItem(name) as HTMLInputElement;
  const out = form.elements.namedItem(`${name}Out`) as HTMLOutputElement;
  input.addEventListener('input', () => (out.value = input.value));
}

function setStatus(text: string, state: 'wait' | 'ok' | 'bad'): void {
  statusText.textContent = text;
  statusDot.className = `dot ${state === 'ok' ? 'ok' : state === 'bad' ? 'bad' : ''}`;
}

// ───────────────────────── connection ─────────────────────────

/** Where the engine's info lives: `?engine=URL`, else this origin (the engine or vite's proxy serves it). */
const infoUrl = new URLSearchParams(location.search).get('engine') ?? '/engine.json';

interface Session {
  readonly node: LanemuxNode;
  readonly messenger: Messenger;
  readonly peer: string;
  readonly credit: number;
  readonly lanes: number;
  /** Side by side: the engine's one-WebSocket-per-stream endpoint, if it offers one. */
  readonly perStream: string | undefined;
}

let session: Session | null = null;
let engineGeneration = 0;

async function engineInfo(): Promise<EngineInfo> {
  const res = await fetch(infoUrl, { cache: 'no-store' });
  if (!res.ok) throw new Error(`${infoUrl}: HTTP ${res.status}`);
  return (await res.json()) as EngineInfo;
}

async function transportFor(info: EngineInfo): Promise<TransportAdapter> {
  if (info.transport === 'webtransport') {
    // Loaded only when asked for, so the WebSocket path never carries it.
    const wt = await import('./webtransport-client.ts');
    return wt.webTransportFor(info);
  }
  // The page owns its reconnects (see connectLoop), so the adapter retries quickly and never alone.
  return webSocketClientTransport({ minReconnectionDelay: 100, reconnectionJitter: 200, maxRetries: 3 });
}

/** Open a session with the engine: a messenger (for the playground's own messages) and a node on it. */
async function openSession(settings: Settings): Promise<Session> {
  const info = await engineInfo();
  const messenger = await createMessenger({
    transports: [await transportFor(info)],
    lanes: settings.lanes,
    transportKeys: [MESSENGER_MUX_KEY],
    healthCheck: false,
    reconnect: false,
  });
  // The credit window is the consumer's: it travels in every ticket this node mints.
  const node = await createNode({ messenger, mux: { initialCredit: settings.credit } });
  try {
    const peer = await node.connect(info.address, { signal: AbortSignal.timeout(5_000) });
    messenger.on('playground.metrics', (_from, _lane, payload) =>
      onReport(JSON.parse(new TextDecoder().decode(payload)) as EngineReport),
    );
    messenger.onPeerGone(() => {
      if (session?.messenger !== messenger) return;
      setStatus('engine went away; reconnecting…', 'bad');
      void closeSession().then(connectLoop);
    });
    const link = messenger.peer(peer);
    setStatus(
      `connected to ${info.runtime} engine over ${info.transport}: ${info.address} (${link?.lanes ?? '?'} lanes)`,
      'ok',
    );
    return { node, messenger, peer, credit: settings.credit, lanes: settings.lanes, perStream: info.perStream };
  } catch (e) {
    await node.close();
    await messenger.close();
    throw e;
  }
}

async function closeSession(): Promise<void> {
  const s = session;
  session = null;
  streams.clear();
  if (s === null) return;
  await s.node.close();
  await s.messenger.close();
}

let connecting = false;
/** Dial until an engine answers (bounded wait between attempts). */
async function connectLoop(): Promise<void> {
  if (connecting) return;
  connecting = true;
  startButton.disabled = true;
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        session = await openSession(readSettings());
        startButton.disabled = false;
        stopButton.disabled = !running;
        return;
      } catch (e) {
        setStatus(
          `no engine at ${infoUrl} (${(e as Error).message}) — start one as shown above; retrying…`,
          attempt === 0 ? 'wait' : 'bad',
        );
        await new Promise((r) => setTimeout(r, Math.min(2_000, 200 * (attempt + 1))));
      }
    }
  } finally {
    connecting = false;
  }
}

// ───────────────────────── streams ─────────────────────────

interface Stream {
  readonly id: number;
  readonly anchor: StreamAnchor<string>;
  text: string;
}

const streams = new Set<Stream>();
let nextId = 1;
let running = false;
let tokensRead = 0;
let refillTimer: ReturnType<typeof setInterval> | undefined;

async function read(stream: Stream, readerRate: number): Promise<void> {
  try {
    for await (const token of stream.anchor) {
      stream.text = (stream.text + token).slice(-160);
      tokensRead++;
      // A slow reader takes its time: credit returns only as fast as it reads.
      if (readerRate > 0) await new Promise((r) => setTimeout(r, 1000 / readerRate));
    }
  } catch {
    // Cancelled (Stop) or the engine went away: the stream just ends here.
  } finally {
    streams.delete(stream);
  }
}

/** Keep `settings.streams` streams open: mint anchors and hand their tickets to the engine. */
async function refill(settings: Settings): Promise<void> {
  const s = session;
  if (s === null || !running) return;
  refillPerStream(s, settings);
  const want = Math.min(64, settings.streams - streams.size);
  if (want <= 0) return;
  const batch: Array<{ handle: string; ticket: string }> = [];
  for (let i = 0; i < want; i++) {
    const anchor = s.node.createAnchor<string>();
    const ticket = s.node.prebindAnchor(anchor);
    if (ticket === undefined) {
      anchor.cancel();
      continue;
    }
    const stream: Stream = { id: nextId++, anchor, text: '' };
    streams.add(stream);
    void read(stream, settings.reader);
    batch.push({ handle: anchor.handle, ticket });
  }
  await s.messenger.request(s.peer, 'playground.generate', { streams: batch });
}

async function start(): Promise<void> {
  const settings = readSettings();
  startButton.disabled = true;
  try {
    // Credit and lanes belong to this page's node: a change means a new session.
    if (session === null || session.credit !== settings.credit || session.lanes !== settings.lanes) {
      stopStreams();
      await closeSession();
      await connectLoop();
    }
    const s = session!;
    const reply = (await s.messenger.request(s.peer, 'playground.configure', {
      flush: settings.flush,
      rate: settings.rate,
      tokens: settings.tokens,
    })) as { generation: number; rebuilt: boolean; error?: string };
    if (reply.error !== undefined) throw new Error(reply.error);
    if (reply.rebuilt) {
      // A flush policy is fixed per node: the engine is rebuilding, so dial its new node.
      stopStreams();
      setStatus('engine rebuilding with the new flush policy…', 'wait');
      await closeSession();
      await connectLoop();
    }
    engineGeneration = reply.generation;
    running = true;
    stopButton.disabled = false;
    clearInterval(refillTimer);
    refillTimer = setInterval(() => {
      refill(readSettings()).catch((e: unknown) => setStatus(`generate failed: ${(e as Error).message}`, 'bad'));
    }, 100);
  } catch (e) {
    setStatus(`could not start: ${(e as Error).message}`, 'bad');
  } finally {
    startButton.disabled = session === null;
  }
}

// ───────────────────────── side by side ─────────────────────────

/** The same load without a multiplexer: one plain WebSocket per stream, one message per token. */
const perStreamSockets = new Set<WebSocket>();

function refillPerStream(s: Session, settings: Settings): void {
  if (!settings.compare || s.perStream === undefined) {
    closePerStream();
    return;
  }
  const want = Math.min(64, settings.streams - perStreamSockets.size);
  for (let i = 0; i < want; i++) {
    const ws = new WebSocket(s.perStream);
    perStreamSockets.add(ws);
    ws.onclose = () => perStreamSockets.delete(ws);
    ws.onerror = () => {};
  }
}

function closePerStream(): void {
  for (const ws of perStreamSockets) ws.close();
  perStreamSockets.clear();
}

function stopStreams(): void {
  running = false;
  closePerStream();
  clearInterval(refillTimer);
  // Cancelling an anchor closes the engine's sender for it (the engine sees `sender.closed`).
  for (const s of [...streams]) s.anchor.cancel();
  streams.clear();
}

// One apply at a time: a change while the previous apply still reconnects waits its turn.
let applying: Promise<void> = Promise.resolve();
const apply = (): void => {
  applying = applying.then(start);
};
startButton.addEventListener('click', apply);
stopButton.addEventListener('click', () => {
  stopStreams();
  stopButton.disabled = true;
});
// Changing streams / rate / tokens / policy while running applies at once.
form.addEventListener('change', () => {
  if (running) apply();
});

// ───────────────────────── charts ─────────────────────────

const activeSeries = new Series(120);
const batchSeries = new Series(120);
const tokenSeries = new Series(120);
const muxWriteSeries = new Series(120);
const perStreamWriteSeries = new Series(120);
let lastReport: EngineReport | null = null;

let drawnGeneration = -1;

function onReport(report: EngineReport): void {
  if (report.generation < engineGeneration) return;
  if (report.generation !== drawnGeneration) {
    // A rebuilt engine (a policy switch) starts its charts afresh, on a scale of its own figures.
    drawnGeneration = report.generation;
    for (const s of [activeSeries, batchSeries, tokenSeries, muxWriteSeries, perStreamWriteSeries]) s.clear();
  }
  lastReport = report;
  activeSeries.push(report.activeStreams);
  batchSeries.push(report.batchesPerSec);
  tokenSeries.push(report.tokensPerSec);
  const c = report.config;
  $('engine-config').textContent =
    `engine generation ${report.generation} · flush ${c.flush} · ${c.rate} passes/s · ${c.tokens} tokens per stream`;
  $('active-streams').textContent = String(report.activeStreams);
  $('batches-per-sec').textContent = report.batchesPerSec.toFixed(0);
  $('tokens-per-sec').textContent = report.tokensPerSec.toFixed(0);
  $('withheld').textContent = String(report.withheldRecords);
  drawCompare(report);
  const h = report.recordsPerBatch;
  let n = 0;
  let sum = 0;
  h.window.forEach((c, i) => {
    n += c;
    // Bucket i holds values in (bound[i-1], bound[i]]: use its upper bound for the mean's estimate.
    sum += c * (h.bounds[i] ?? (h.bounds[h.bounds.length - 1] ?? 1) * 2);
  });
  $('records-per-batch').textContent = n === 0 ? '–' : `≈ ${(sum / n).toFixed(1)}`;
  drawLines($<HTMLCanvasElement>('chart-streams'), [{ series: activeSeries, color: '#3ecf8e' }]);
  drawLines($<HTMLCanvasElement>('chart-batches'), [
    { series: tokenSeries, color: '#5b6673' },
    { series: batchSeries, color: '#4ea1ff' },
  ]);
  drawBars(
    $<HTMLCanvasElement>('chart-histogram'),
    h.window,
    [...h.bounds.map((b) => (b >= 1024 ? `${b / 1024}k` : String(b))), '>2k'],
    '#4ea1ff',
  );
  drawBars(
    $<HTMLCanvasElement>('chart-lanes'),
    report.lanes.map((l) => l.streams),
    report.lanes.map((l, i) => `L${i}${l.bufferedBytes > 0 ? ` ${Math.round(l.bufferedBytes / 1024)}k` : ''}`),
    '#f5b94a',
  );
}

/** The side-by-side card: the mux's writes beside those of one WebSocket per stream. */
function drawCompare(report: EngineReport): void {
  const ps = report.perStream;
  muxWriteSeries.push(report.batchesPerSec);
  perStreamWriteSeries.push(ps?.writesPerSec ?? 0);
  $('mux-writes-per-sec').textContent = report.batchesPerSec.toFixed(0);
  $('mux-streams').textContent = String(report.activeStreams);
  $('ps-writes-per-sec').textContent = (ps?.writesPerSec ?? 0).toFixed(0);
  $('ps-streams').textContent = String(ps?.streams ?? 0);
  $('writes-ratio').textContent =
    ps === undefined
      ? 'this engine offers no per-stream endpoint'
      : ps.streams === 0 || report.batchesPerSec === 0
        ? 'tick "Side by side" to compare'
        : `${(ps.writesPerSec / report.batchesPerSec).toFixed(0)}× the writes without the multiplexer`;
  // One scale for both lines: the gap between them is the point.
  drawLines(
    $<HTMLCanvasElement>('chart-compare'),
    [
      { series: muxWriteSeries, color: '#4ea1ff' },
      { series: perStreamWriteSeries, color: '#f5b94a' },
    ],
    true,
  );
}

/** Redraw what the page measures itself: credit per slot and the live text (10×/s). */
function drawLocal(): void {
  const s = session;
  $('tokens-read').textContent = String(tokensRead);
  $('credit-window').textContent = String(s?.credit ?? readSettings().credit);
  const cells: Array<{ remaining: number; buffered: number; limit: number }> = [];
  for (const st of streams) {
    // The consumer's account of this slot: credit the engine still holds, records read-ahead.
    const credit = st.anchor.credit;
    if (credit !== null) cells.push({ remaining: credit.remaining, buffered: credit.outstanding, limit: credit.limit });
  }
  drawCreditGrid($<HTMLCanvasElement>('chart-credit'), cells);
  const newest = [...streams].sort((a, b) => b.id - a.id).slice(0, 6);
  liveTokens.replaceChildren(
    ...newest.map((st) => {
      const row = document.createElement('div');
      const id = document.createElement('span');
      id.className = 'id';
      id.textContent = `#${st.id} `;
      row.append(id, st.text.slice(-90));
      return row;
    }),
  );
  if (lastReport === null && s !== null) $('records-per-batch').textContent = '–';
}
setInterval(drawLocal, 100);

// The page opens already streaming with the form's settings (Stop pauses, Start applies a change).
apply();
