// A relay on a frontend node between an engine and a browser-side consumer (three nodes over the
// memory transport): end-to-end credit (the browser's reading returns the engine's credit, the
// frontend holds at most the source window + 1 per stream), stop and cancel browser → engine,
// finish and sender errors engine → browser, and a failure of either hop ending the other.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { isLanemuxError } from '../../src/errors.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { openRelay, relay, type Relay } from '../../src/stream/relay.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

/** The frontend's credit window toward the engine (C of every source anchor) and the browser's. */
const SOURCE_CREDIT = 16;
const BROWSER_CREDIT = 8;

/** Engine and browser both dial the frontend; `cutEngine()` cuts the engine's link. */
async function trio(options: { engine?: Partial<NodeOptions>; frontend?: Partial<NodeOptions> } = {}) {
  const network = createMemoryNetwork();
  const engineLink = cuttable(network);
  const frontend = await createNode({
    transports: [memoryTransport({ network, name: 'frontend' })],
    // A small slot byte budget toward the engine: a sender without credit blocks soon.
    mux: { initialCredit: SOURCE_CREDIT, slotByteBudget: 1024 },
    ...options.frontend,
  });
  const engine = await createNode({ transports: [engineLink.adapter], ...options.engine });
  const browser = await createNode({
    transports: [memoryTransport({ network, listen: false })],
    mux: { initialCredit: BROWSER_CREDIT },
  });
  nodes.push(frontend, engine, browser);
  await engine.connect('memory://frontend');
  await browser.connect('memory://frontend');
  return { frontend, engine, browser, cutEngine: engineLink.cut };
}

type Trio = Awaited<ReturnType<typeof trio>>;

/** One relayed stream: the browser's anchor, the frontend's relay, the engine's sender. */
async function relayed(
  t: Trio,
): Promise<{ out: StreamAnchor<string>; r: Relay<string>; engine: StreamSender<string> }> {
  const out = t.browser.createAnchor<string>();
  const r = await openRelay<string>(t.frontend, out.handle);
  const engine = await t.engine.attachAnchor<string>(r.source.handle);
  return { out, r, engine };
}

/** Read an anchor to its end: its items, or the error that ended it. */
async function collect(anchor: StreamAnchor<string>): Promise<{ items: string[]; error: unknown }> {
  const items: string[] = [];
  try {
    for await (const v of anchor) items.push(v);
    return { items, error: null };
  } catch (error) {
    return { items, error };
  }
}

const tokens = (n: number): string[] => Array.from({ length: n }, (_, i) => `t${i}`);

describe('relay', () => {
  it('relays every token in order, finalizes the browser stream, and ends holding nothing', async () => {
    const t = await trio();
    const { out, r, engine } = await relayed(t);
    const read = collect(out);
    for (const tok of tokens(500)) await engine.send(tok);
    await engine.finalize();
    const got = await read;
    expect(got.error).toBeNull();
    expect(got.items).toEqual(tokens(500));
    expect(await r.done).toBeNull();
    expect(r.relayed).toBe(500);
    expect(r.held).toBe(0);
  });

  it('a stalled browser holds back only its own stream: the other completes, the stalled engine sender waits for credit, the frontend holds its source window', async () => {
    const t = await trio();
    const N = 2_000;
    /** Relay N tokens on `s` to a browser that reads them all: how long it took, ms. */
    const run = async (s: Awaited<ReturnType<typeof relayed>>): Promise<number> => {
      const start = performance.now();
      const read = collect(s.out);
      for (const tok of tokens(N)) await s.engine.send(tok);
      await s.engine.finalize();
      const got = await read;
      expect(got.error).toBeNull();
      expect(got.items).toEqual(tokens(N));
      expect(await s.r.done).toBeNull();
      return performance.now() - start;
    };
    // The rate of one relayed stream with nothing stalled, on the same nodes.
    const alone = await run(await relayed(t));
    const stalled = await relayed(t);
    const live = await relayed(t);
    // The stalled stream's engine sends until send() blocks (credit gone and its slot byte budget full).
    let sentStalled = 0;
    let blocked = false;
    void (async () => {
      for (const tok of tokens(N)) {
        blocked = true;
        await stalled.engine.send(tok);
        blocked = false;
        sentStalled++;
      }
    })().catch(() => {});
    const beside = await run(live);
    // Credit rounds, not CPU, pace a stream here: the stalled neighbour does not slow it. A stream held
    // back by its neighbour would not complete at all; the bound is slack for other test files taking
    // the CPU during one of the two ~250 ms runs (a 2x bound failed that way).
    expect(beside, `alone ${alone.toFixed(0)} ms, beside a stalled stream ${beside.toFixed(0)} ms`).toBeLessThan(
      5 * alone + 500,
    );

    // The stalled stream: the browser's window went out, nothing more was taken from the source.
    await waitFor(() => stalled.r.held === SOURCE_CREDIT, 5_000, 'the stalled source to fill its window');
    expect(stalled.r.relayed).toBe(BROWSER_CREDIT);
    expect(stalled.r.held).toBeLessThanOrEqual(SOURCE_CREDIT + 1);
    expect(stalled.r.source.credit?.remaining).toBe(0); // the engine holds no credit for it
    expect(stalled.out.credit?.outstanding).toBe(BROWSER_CREDIT);
    // Its engine sender has withheld the rest up to its byte budget and waits.
    await waitFor(() => blocked && sentStalled < N, 5_000, 'the stalled engine sender to block');
    const sentThen = sentStalled;
    // The browser reads one window: exactly that much more crosses both hops, and the bound holds.
    const taken: string[] = [];
    expect(stalled.out.takeAvailable(taken)).toBe(BROWSER_CREDIT);
    await waitFor(() => stalled.r.relayed === 2 * BROWSER_CREDIT, 5_000, 'the next window to be relayed');
    expect(stalled.r.held).toBeLessThanOrEqual(SOURCE_CREDIT + 1);
    expect(taken).toEqual(tokens(BROWSER_CREDIT));
    expect(sentStalled).toBeGreaterThanOrEqual(sentThen);
    stalled.out.cancel();
    expect(await stalled.r.done).toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
  });

  it("the browser's stop reaches the engine, whose tail and finish reach the browser", async () => {
    const t = await trio();
    const { out, r, engine } = await relayed(t);
    const read = collect(out);
    await engine.send('a');
    await waitFor(() => r.relayed === 1);
    out.requestStop();
    await new Promise<void>((resolve) => {
      if (engine.stopSignal.aborted) resolve();
      else engine.stopSignal.addEventListener('abort', () => resolve(), { once: true });
    });
    expect(engine.cancelSignal.aborted).toBe(false);
    await engine.send('tail');
    await engine.finalize();
    expect(await read).toEqual({ items: ['a', 'tail'], error: null });
    expect(await r.done).toBeNull();
  });

  it("the browser's cancel cancels the engine's sender (ERR_STREAM_CANCELLED)", async () => {
    const t = await trio();
    const { out, r, engine } = await relayed(t);
    await engine.send('a');
    await waitFor(() => r.relayed === 1);
    out.cancel();
    await new Promise<void>((resolve) => {
      if (engine.cancelSignal.aborted) resolve();
      else engine.cancelSignal.addEventListener('abort', () => resolve(), { once: true });
    });
    expect(engine.cancelSignal.reason).toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    await expect(engine.send('b')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(await r.done).toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(r.source.finished).toBe(true);
  });

  it('a sender error crosses to the browser and the stream goes on', async () => {
    const t = await trio();
    const { out, r, engine } = await relayed(t);
    const errors: string[] = [];
    const items: string[] = [];
    const ended = new Promise<unknown>((resolve) => {
      out.consume({
        item: (v) => void items.push(v),
        senderError: (e) => void errors.push(`${e.code} ${e.message}`),
        end: resolve,
      });
    });
    await engine.send('a');
    await engine.error('tool call failed');
    await engine.send('b');
    await engine.finalize();
    expect(await ended).toBeNull();
    expect(items).toEqual(['a', 'b']);
    expect(errors).toEqual(['ERR_SENDER_ERROR tool call failed']);
    expect(r.relayed).toBe(3);
    expect(await r.done).toBeNull();
  });

  it('the engine closing ends the browser stream with ERR_SENDER_DROPPED (retryable)', async () => {
    const t = await trio();
    const { out, r, engine } = await relayed(t);
    const read = collect(out);
    await engine.send('a');
    await waitFor(() => r.relayed === 1);
    await t.engine.close();
    const got = await read;
    expect(got.items).toEqual(['a']);
    expect(isLanemuxError(got.error, 'ERR_SENDER_DROPPED')).toBe(true);
    expect((got.error as { retryable: boolean }).retryable).toBe(true);
    expect(await r.done).toMatchObject({ code: 'ERR_SENDER_DROPPED' });
  });

  it("the engine's link dropping without resume ends the browser stream with ERR_SENDER_DROPPED", async () => {
    const t = await trio({ engine: { resume: false } });
    const { out, r, engine } = await relayed(t);
    const read = collect(out);
    await engine.send('a');
    await waitFor(() => r.relayed === 1);
    t.cutEngine();
    const got = await read;
    expect(got.items).toEqual(['a']);
    expect(isLanemuxError(got.error, 'ERR_SENDER_DROPPED')).toBe(true);
    expect((got.error as { retryable: boolean }).retryable).toBe(true);
    expect(await r.done).toMatchObject({ code: 'ERR_SENDER_DROPPED' });
  });

  it("the browser closing cancels the engine's sender", async () => {
    const t = await trio();
    const { r, engine } = await relayed(t);
    await engine.send('a');
    await waitFor(() => r.relayed === 1);
    await t.browser.close();
    await new Promise<void>((resolve) => {
      if (engine.cancelSignal.aborted) resolve();
      else engine.cancelSignal.addEventListener('abort', () => resolve(), { once: true });
    });
    await expect(engine.send('b')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(await r.done).not.toBeNull();
    expect(r.source.finished).toBe(true);
  });

  it("cancel() cancels the engine's sender and ends the browser stream with ERR_SENDER_DROPPED", async () => {
    const t = await trio();
    const { out, r, engine } = await relayed(t);
    const read = collect(out);
    await engine.send('a');
    await waitFor(() => r.relayed === 1);
    r.cancel();
    expect(await r.done).toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    const got = await read;
    expect(got.items).toEqual(['a']);
    expect(isLanemuxError(got.error, 'ERR_SENDER_DROPPED')).toBe(true);
    await new Promise<void>((resolve) => {
      if (engine.cancelSignal.aborted) resolve();
      else engine.cancelSignal.addEventListener('abort', () => resolve(), { once: true });
    });
    await expect(engine.send('b')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
  });

  it('an aborted signal ends the relay as cancel() does (ERR_ABORTED)', async () => {
    const t = await trio();
    const out = t.browser.createAnchor<string>();
    const ac = new AbortController();
    const r = await openRelay<string>(t.frontend, out.handle, { signal: ac.signal });
    const engine = await t.engine.attachAnchor<string>(r.source.handle);
    const read = collect(out);
    ac.abort();
    expect(await r.done).toMatchObject({ code: 'ERR_ABORTED' });
    expect(isLanemuxError((await read).error, 'ERR_SENDER_DROPPED')).toBe(true);
    await expect(
      (async () => {
        for (;;) await engine.send('x');
      })(),
    ).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
  });

  it('zero-RTT on both hops: tickets from prebindAnchor open both streams', async () => {
    const t = await trio();
    const out = t.browser.createAnchor<string>();
    const browserTicket = t.browser.prebindAnchor(out)!;
    const r = await openRelay<string>(t.frontend, out.handle, { ticket: browserTicket });
    const engineTicket = t.frontend.prebindAnchor(r.source)!;
    expect(engineTicket).toBeTypeOf('string');
    const engine = await t.engine.openAnchorStream<string>(r.source.handle, engineTicket);
    const read = collect(out);
    for (const tok of tokens(100)) await engine.send(tok);
    await engine.finalize();
    expect(await read).toEqual({ items: tokens(100), error: null });
    expect(await r.done).toBeNull();
  });

  it('a target anchor on the relaying node itself: every token, and a stalled reader holds the source to its window', async () => {
    const t = await trio();
    const local = t.frontend.createAnchor<string>();
    const r = await openRelay<string>(t.frontend, local.handle);
    const engine = await t.engine.attachAnchor<string>(r.source.handle);
    expect(r.target.negotiatedTransport).toBeNull(); // same worker: straight into the anchor
    // Nobody reads `local` yet: the engine runs out of credit at the source, the relay takes no more.
    let sent = 0;
    const writes = (async () => {
      for (const tok of tokens(1_000)) {
        await engine.send(tok);
        sent++;
      }
      await engine.finalize();
    })();
    await waitFor(() => r.held === SOURCE_CREDIT && r.source.credit?.remaining === 0, 5_000, 'the source to fill');
    expect(r.held).toBeLessThanOrEqual(SOURCE_CREDIT + 1);
    expect(sent).toBeLessThan(1_000);
    const got = await collect(local);
    await writes;
    expect(got).toEqual({ items: tokens(1_000), error: null });
    expect(await r.done).toBeNull();
  });

  it('relay() joins an anchor and a sender the frontend made itself; the anchor has one reader', async () => {
    const t = await trio();
    const out = t.browser.createAnchor<string>();
    const target = await t.frontend.attachAnchor<string>(out.handle);
    const source = t.frontend.createAnchor<string>();
    const r = relay(source, target);
    expect(() => relay(source, target)).toThrow(expect.objectContaining({ code: 'ERR_READER_ACTIVE' }));
    const engine = await t.engine.attachAnchor<string>(source.handle);
    const read = collect(out);
    await engine.send('x');
    await engine.finalize();
    expect(await read).toEqual({ items: ['x'], error: null });
    expect(await r.done).toBeNull();
  });
});
