// Real-browser end-to-end over WebSocket: Debian Chromium (playwright-core) runs the vite-built page
// (e2e/page), whose lanemux node consumes token streams from a Node lanemux server (in-process,
// e2e/servers/node-ws-server.ts). Every scenario asserts exact content and order.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { drive, startE2e } from './support/harness.ts';
import type { E2eEnv } from './support/harness.ts';
import { startNodeWsServer } from './servers/node-ws-server.ts';
import type { NodeWsServer } from './servers/node-ws-server.ts';
import { tailText, tokenText } from './support/protocol.ts';
import { RECORD_HEADER_LEN } from '../src/wire/constants.ts';
import { itemStringLength } from '../src/wire/frame.ts';
import { seededRandom } from '../test/support/seeded-random.ts';
import { recoverySummary } from './support/recovery.ts';
import type { Recovery } from './page/api.ts';

let env: E2eEnv;
const servers: NodeWsServer[] = [];
const pages: Page[] = [];

beforeAll(async () => {
  env = await startE2e();
}, 60_000);

// Each scenario gets its own server and pages: close them after it.
afterEach(async () => {
  for (const p of pages.splice(0)) {
    await drive(p, 'close').catch(() => {});
    await p.close();
  }
  for (const s of servers.splice(0)) await s.close();
  expect(env.pageErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await env?.close();
});

async function server(options: Parameters<typeof startNodeWsServer>[0] = {}): Promise<NodeWsServer> {
  const s = await startNodeWsServer(options);
  servers.push(s);
  return s;
}

async function page(): Promise<Page> {
  const p = await env.openPage();
  pages.push(p);
  return p;
}

/** Resolve when `predicate` holds (bounded poll: server-side state has no event). */
async function until(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

// The page's consumer terms where a test counts records exactly: no heartbeat may join the count.
const QUIET = { heartbeatInterval: 600_000 } as const;

const expected = (prompt: string, n: number): string[] => Array.from({ length: n }, (_, i) => tokenText(prompt, i));

describe('browser over WebSocket (Node server)', () => {
  it('1. streams tokens to the page: exact content and order, in the DOM too', async () => {
    const srv = await server();
    const p = await page();
    const { peer } = await drive(p, 'connect', { url: srv.url, kind: 'ws' });
    expect(peer).toBe(srv.node.workerId.toString(16).padStart(16, '0'));
    const ids = await Promise.all([
      drive(p, 'generate', { prompt: 'alpha', n: 50 }),
      drive(p, 'generate', { prompt: 'beta', n: 3 }),
      drive(p, 'generate', { prompt: 'gamma', n: 0 }),
    ]);
    const [a, b, c] = await Promise.all(ids.map((id) => drive(p, 'waitEnd', id)));
    expect(a!.tokens).toEqual(expected('alpha', 50));
    expect(b!.tokens).toEqual(expected('beta', 3));
    expect(c!.tokens).toEqual([]);
    for (const r of [a!, b!, c!]) {
      expect(r.end).toBe('finalized');
      expect(r.error).toBeNull();
      expect(await drive(p, 'domText', r.id)).toBe(r.tokens.join(''));
    }
    expect(srv.served.get('alpha')!.outcome).toBe('finalized');
    // The zero-RTT path: the server opened every stream from the ticket, no attach round trip.
    const m = srv.node.metrics();
    expect(m['velo_streaming_anchor_operations_total{operation="open",outcome="success",transport_scheme="mux"}']).toBe(
      3,
    );
    expect(
      m['velo_streaming_anchor_operations_total{operation="attach",outcome="success",transport_scheme="mux"}'],
    ).toBeUndefined();
  });

  it('3. 256 concurrent streams in one page: per-stream order checked in the page', async () => {
    const srv = await server();
    const p = await page();
    await drive(p, 'connect', { url: srv.url, kind: 'ws', mux: QUIET });
    // E2E_TOKENS raises the per-stream count for a longer measurement (the default keeps the suite fast).
    const n = Number(process.env['E2E_TOKENS'] ?? 200);
    const sum = await drive(p, 'generateMany', 256, { prompt: 'c', n });
    console.log(
      `[e2e ws] 256 streams x ${n} tokens: ${Math.round(sum.tokensPerSecond)} tokens/s, wall ${sum.wallMs.toFixed(0)} ms, ttft p50 ${sum.ttftP50Ms.toFixed(1)} ms, p99 ${sum.ttftP99Ms.toFixed(1)} ms; generate reply p50 ${sum.replyP50Ms.toFixed(1)} ms`,
    );
    expect(sum.badStreams).toEqual([]);
    expect(sum.allOrdered).toBe(true);
    expect(sum.allFinalized).toBe(true);
    expect(sum.tokens).toBe(256 * n);
    // Spot-check exact content from outside the page, including the DOM.
    for (const i of [0, 127, 255]) {
      const r = await drive(p, 'result', sum.ids[i]!);
      expect(r.tokens).toEqual(expected(`c${i}`, n));
      expect(await drive(p, 'domText', r.id)).toBe(expected(`c${i}`, n).join(''));
    }
    const m = srv.node.metrics();
    expect(m['velo_streaming_mux_records_sent_total{record_type="data"}']).toBe(256 * (n + 1));
    // Batching happened: far fewer batches than records.
    expect(m['velo_streaming_mux_batches_total{direction="sent"}']).toBeLessThan((256 * (n + 1)) / 4);
  });

  it('3b. 256 concurrent streams read in push mode (anchor.consume): exact content and order in the page', async () => {
    const srv = await server();
    const p = await page();
    await drive(p, 'connect', { url: srv.url, kind: 'ws', mux: QUIET });
    const n = 100;
    const sum = await drive(p, 'generateMany', 256, { prompt: 'q', n, reader: 'push' });
    console.log(
      `[e2e ws push] 256 streams x ${n} tokens: ${Math.round(sum.tokensPerSecond)} tokens/s, wall ${sum.wallMs.toFixed(0)} ms`,
    );
    expect(sum.badStreams).toEqual([]);
    expect(sum.allOrdered).toBe(true);
    expect(sum.allFinalized).toBe(true);
    expect(sum.tokens).toBe(256 * n);
    for (const i of [0, 200]) {
      const r = await drive(p, 'result', sum.ids[i]!);
      expect(r.tokens).toEqual(expected(`q${i}`, n));
      expect(await drive(p, 'domText', r.id)).toBe(expected(`q${i}`, n).join(''));
    }
  });

  for (const how of ['crash', 'close'] as const) {
    it(`4. the server restarts mid-stream (${how}): open streams end retryable, partysocket reconnects, new requests succeed`, async () => {
      const first = await server();
      const p = await page();
      await drive(p, 'connect', { url: first.url, kind: 'ws' });
      // Two streams read with `for await`, two in push mode: both end the same way.
      const ids = await Promise.all(
        ['k0', 'k1', 'k2', 'k3'].map((prompt, i) =>
          drive(p, 'generate', { prompt, n: 1_000_000, delayMs: 5, reader: i < 2 ? 'iterator' : 'push' }),
        ),
      );
      for (const id of ids) await drive(p, 'waitTokens', id, 5, 10_000);
      // crash: every socket reset at once, as a killed process; close: the node shuts down (GOAWAY, close frames).
      await first[how]();
      for (const id of ids) {
        const r = await drive(p, 'waitEnd', id);
        expect(r.end).toBe('error');
        expect(r.error?.retryable).toBe(true);
        expect(r.error?.code).toBe('ERR_SENDER_DROPPED');
        // What arrived before the restart is an exact prefix, in order.
        expect(r.orderOk).toBe(true);
        expect(r.tokens).toEqual(expected(r.prompt, r.tokens.length));
        expect(r.tokens.length).toBeGreaterThanOrEqual(5);
      }
      // Same port, a new server (new worker id): the page's partysocket dial reconnects by itself.
      const second = await server({ port: first.port });
      const peer = await drive(p, 'waitPeer', 10_000);
      expect(peer).toBe(second.node.workerId.toString(16).padStart(16, '0'));
      const id = await drive(p, 'generate', { prompt: 'after', n: 20 });
      const r = await drive(p, 'waitEnd', id);
      expect(r.end).toBe('finalized');
      expect(r.tokens).toEqual(expected('after', 20));
      expect(await drive(p, 'domText', id)).toBe(expected('after', 20).join(''));
    });
  }

  it('5. a page that stops reading: the server holds at most its byte budget for it; another page keeps streaming', async () => {
    const srv = await server();
    const slow = await page();
    const fast = await page();
    const credit = 32;
    const slotByteBudget = 4096;
    const slowStreams = 16;
    // The stalled page is the consumer: its credit and slot byte budget are the terms in its tickets.
    const { workerId: slowPeer } = await drive(slow, 'connect', {
      url: srv.url,
      kind: 'ws',
      mux: { ...QUIET, initialCredit: credit, slotByteBudget },
    });
    await drive(fast, 'connect', { url: srv.url, kind: 'ws', mux: QUIET });
    const slowIds = await Promise.all(
      Array.from({ length: slowStreams }, (_, i) =>
        drive(slow, 'generate', { prompt: `s${i}`, n: 10_000_000, read: false, render: false }),
      ),
    );
    const slowServed = () => [...srv.served.values()].filter((s) => s.peer === slowPeer);
    // Bytes the server's mux holds for a stalled stream: the records it took but may not send yet
    // (tokens credit..accepted: the first `credit` went out, the last one is the send still waiting).
    const withheldBytes = (prompt: string, accepted: number): number => {
      let b = 0;
      for (let i = credit; i <= accepted; i++) b += RECORD_HEADER_LEN + itemStringLength(tokenText(prompt, i));
      return b;
    };
    const heldForSlowPeer = (): number =>
      slowServed().reduce((a, s) => a + (s.accepted >= credit ? withheldBytes(s.prompt, s.accepted) : 0), 0);
    let maxHeld = 0;
    let maxBuffered = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        maxHeld = Math.max(maxHeld, heldForSlowPeer());
        maxBuffered = Math.max(maxBuffered, srv.messenger.bufferedAmount(slowPeer, 0));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const sum = await drive(fast, 'generateMany', 32, { prompt: 'f', n: 300 });
    expect(sum.badStreams).toEqual([]);
    expect(sum.allOrdered && sum.allFinalized).toBe(true);
    expect(sum.tokens).toBe(32 * 300);
    // Every stalled producer is parked in send(): paused at its byte budget, not buffering without bound.
    await until(
      () => slowServed().length === slowStreams && slowServed().every((s) => s.waiting),
      'every stalled producer paused',
    );
    sampling = false;
    await sampler;
    const m = srv.node.metricsRegistry;
    const accepted = slowServed().map((s) => s.accepted);
    for (const s of slowServed()) {
      const held = withheldBytes(s.prompt, s.accepted);
      const last = RECORD_HEADER_LEN + itemStringLength(tokenText(s.prompt, s.accepted));
      // Paused exactly when the withheld bytes reached the budget: at least the budget, less than one record over.
      expect(held).toBeGreaterThanOrEqual(slotByteBudget);
      expect(held - last).toBeLessThan(slotByteBudget);
    }
    // The mux's own gauge agrees: the fast page's streams are done, every withheld record is the stalled peer's.
    expect(m.withheldRecords).toBe(slowServed().reduce((a, s) => a + s.accepted - credit + 1, 0));
    expect(m.producerSendBackpressure).toBeGreaterThanOrEqual(slowStreams);
    // Only the credit went to the stalled page: C data records per stream, besides the fast page's 32 × (300 + Finalized).
    expect(m.recordsSent[0]).toBe(32 * 301 + slowStreams * credit);
    // At no point did the server hold more than the peer's budget (streams × slot byte budget, plus one record each),
    // nor a socket backlog toward it.
    expect(maxHeld).toBeLessThanOrEqual(slowStreams * (slotByteBudget + 32));
    expect(maxBuffered).toBeLessThan(64 * 1024);
    console.log(
      `[e2e ws] stalled page: ${slowStreams} streams, server accepted ${accepted.join('/')} tokens, withheld ${m.withheldRecords} records, max held ${maxHeld} B of ${slowStreams * slotByteBudget} B budget, max socket backlog ${maxBuffered} B`,
    );
    // Leave: the stalled page cancels its streams; the server's producers see it and the withheld records go.
    for (const id of slowIds) await drive(slow, 'cancel', id);
    await until(() => slowServed().every((s) => s.outcome === 'cancelled'), 'stalled producers cancelled');
    await until(() => m.withheldRecords === 0, 'withheld records released');
  });

  it('6. stop and cancel from the page', async () => {
    const srv = await server();
    const p = await page();
    await drive(p, 'connect', { url: srv.url, kind: 'ws' });
    const stopId = await drive(p, 'generate', { prompt: 'stop', n: 1_000_000, delayMs: 5, tail: 3 });
    const cancelId = await drive(p, 'generate', { prompt: 'cancel', n: 1_000_000, delayMs: 5 });
    await drive(p, 'waitTokens', stopId, 3, 10_000);
    await drive(p, 'waitTokens', cancelId, 3, 10_000);

    await drive(p, 'requestStop', stopId);
    const stopped = await drive(p, 'waitEnd', stopId);
    expect(stopped.end).toBe('finalized');
    expect(stopped.error).toBeNull();
    expect(stopped.orderOk).toBe(true);
    expect(stopped.tailCount).toBe(3);
    expect(stopped.tokens).toEqual([
      ...expected('stop', stopped.mainCount),
      tailText('stop', 0),
      tailText('stop', 1),
      tailText('stop', 2),
    ]);
    expect(await drive(p, 'domText', stopId)).toBe(stopped.tokens.join(''));
    const s = srv.served.get('stop')!;
    expect(s.outcome).toBe('stopped');
    expect(s.tailSent).toBe(3);
    // Nothing the server took was lost: the page got every main token it accepted.
    expect(stopped.mainCount).toBe(s.accepted);

    await drive(p, 'cancel', cancelId);
    const cancelled = await drive(p, 'waitEnd', cancelId);
    expect(cancelled.end).toBe('cancelled');
    expect(cancelled.orderOk).toBe(true);
    expect(cancelled.tokens).toEqual(expected('cancel', cancelled.tokens.length));
    const c = srv.served.get('cancel')!;
    await until(() => c.outcome === 'cancelled' && c.sendErrorCode !== null, 'server saw the cancel');
    // The producer's cancelSignal fired and its next send failed, naming the consumer's cancel: the
    // LifecycleSlot{cancel} is applied before the CloseSlot{UnknownSlot} it rides with.
    expect(c.cancelReason).toBe('ERR_STREAM_CANCELLED');
    expect(c.sendErrorCode).toBe('ERR_STREAM_CANCELLED');
    // A cancel discards what was in flight: the page has at most what the server took.
    expect(cancelled.tokens.length).toBeLessThanOrEqual(c.accepted);
    await until(() => srv.node.metricsRegistry.liveSlots === 0, 'server slots closed');
  });

  it('7. the server loses its sockets 20 times at random moments while 256 streams flow: every stream resumes, exact and in order', {
    timeout: 60_000,
  }, async () => {
    const CUTS = 20;
    const STREAMS = 256;
    const random = seededRandom(0x7e57_0007);
    const srv = await server({ resume: { windowMs: 30_000 } });
    const p = await page();
    await drive(p, 'connect', { url: srv.url, kind: 'ws', mux: QUIET, resume: { windowMs: 30_000 } });
    // Paced, endless tokens: every stream flows at every cut; a stop ends them all afterwards.
    const ids = await drive(p, 'startMany', STREAMS, { prompt: 'rs', n: 1_000_000, delayMs: 20, render: false });
    const recoveries: Recovery[] = [];
    const cutWallMs: number[] = [];
    for (let cut = 0; cut < CUTS; cut++) {
      // A random moment (seeded: the same on every run), then the link is lost on the server's side.
      await new Promise((r) => setTimeout(r, 50 + Math.floor(random() * 350)));
      const { downs } = await drive(p, 'linkState');
      cutWallMs.push(Date.now());
      expect(srv.cut()).toBeGreaterThan(0);
      // partysocket dials again by itself; every stream flows again once resumed.
      recoveries.push(await drive(p, 'waitFlowing', ids, downs, 15_000));
    }
    console.log(`[e2e ws resume] ${recoverySummary(STREAMS, cutWallMs, recoveries)}`);
    expect(recoveries.map((r) => r.open)).toEqual(recoveries.map(() => STREAMS));
    // Every cut suspended every stream and each was resumed once, on both sides; none failed.
    const pm = await drive(p, 'metrics');
    const m = srv.node.metrics();
    for (const side of [pm, m]) {
      expect(side['velo_streaming_resumed_streams_total']).toBe(STREAMS * CUTS);
      expect(Object.keys(side).filter((k) => k.startsWith('velo_streaming_resume_failed_total'))).toEqual([]);
    }
    await drive(p, 'stopMany', ids);
    const sum = await drive(p, 'waitMany', ids);
    expect(sum.badStreams).toEqual([]);
    expect(sum.allOrdered && sum.allFinalized).toBe(true);
    // Exact: each stream got every token its producer took, in order, and nothing else.
    const accepted = ids.map((_, i) => srv.served.get(`rs${i}`)!);
    expect(accepted.every((s) => s.outcome === 'stopped')).toBe(true);
    expect(sum.mainCounts).toEqual(accepted.map((s) => s.accepted));
    expect(Math.min(...sum.mainCounts)).toBeGreaterThan(CUTS);
    for (const i of [0, 255])
      expect((await drive(p, 'result', ids[i]!)).tokens).toEqual(expected(`rs${i}`, sum.mainCounts[i]!));
    await until(() => srv.node.metricsRegistry.liveSlots === 0, 'server slots closed');
    expect((await drive(p, 'metrics'))['velo_streaming_mux_live_slots']).toBe(0);
    console.log(`[e2e ws resume] ${sum.tokens} tokens in ${sum.wallMs.toFixed(0)} ms`);
  });

  it('8. a page reload mid-stream re-attaches from its token and completes the text exactly once; a tampered token is refused', {
    timeout: 30_000,
  }, async () => {
    const N = 400;
    const srv = await server({ resume: { history: true } });
    const p = await page();
    const connectTo = { url: srv.url, kind: 'ws', resume: {} } as const;
    await drive(p, 'connect', connectTo);
    // Paced: the reload lands mid-stream; the page saves the token and each rendered token in sessionStorage.
    const id = await drive(p, 'generate', { prompt: 'reload', n: N, delayMs: 15, persist: true });
    await drive(p, 'waitTokens', id, 100, 10_000);
    const reloadAt = performance.now();
    await p.reload();
    await p.waitForFunction(() => typeof (window as unknown as { e2e?: unknown }).e2e === 'object');
    const reloadMs = performance.now() - reloadAt;
    // A new page, a new node: the old one's DOM, stream and link are gone.
    expect(await drive(p, 'domText', id)).toBeNull();
    const { peer } = await drive(p, 'connect', connectTo);
    expect(peer).toBe(srv.node.workerId.toString(16).padStart(16, '0'));
    const stream = srv.served.get('reload')!;
    expect(stream.outcome).toBe('streaming');

    // A token with one digit changed names no stream: refused, and the stream is untouched.
    const refused = await drive(p, 'reattach', 'reload', { tamper: true });
    expect(refused.error?.code).toBe('ERR_ATTACH_REFUSED');
    expect(refused.error?.retryable).toBe(false);

    const acceptedAtReattach = stream.accepted;
    const t0 = performance.now();
    const re = await drive(p, 'reattach', 'reload');
    expect(re.error).toBeNull();
    expect(re.id).toBe(id);
    // What the page had rendered before the reload, and no more: the rest comes from the server's history.
    expect(re.offset).toBeGreaterThanOrEqual(100);
    expect(re.offset).toBeLessThan(N);
    const r = await drive(p, 'waitEnd', id);
    const doneMs = performance.now() - t0;
    expect(r.end).toBe('finalized');
    expect(r.error).toBeNull();
    // Exactly once, in order: no duplicate at the seam, nothing missing.
    expect(r.orderOk).toBe(true);
    expect(r.tokens).toEqual(expected('reload', N));
    expect(await drive(p, 'domText', id)).toBe(expected('reload', N).join(''));
    expect(stream.outcome).toBe('finalized');
    expect(stream.accepted).toBe(N);
    const m = srv.node.metrics();
    expect(
      m['velo_streaming_anchor_operations_total{operation="reattach",outcome="success",transport_scheme="mux"}'],
    ).toBe(1);
    await until(() => srv.node.metricsRegistry.liveSlots === 0, 'server slots closed');
    expect((await drive(p, 'metrics'))['velo_streaming_mux_live_slots']).toBe(0);
    console.log(
      `[e2e ws reload] reload ${reloadMs.toFixed(0)} ms; re-attached at offset ${re.offset} (server had taken ${acceptedAtReattach}), rest of ${N} tokens in ${doneMs.toFixed(0)} ms`,
    );
  });
});
