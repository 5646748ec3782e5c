// A relayed stream survives a lost link on either hop (docs/protocol.md §8.3), over real TCP: the
// engine and the browser-side node each dial the frontend through a proxy that plays the network.
// One cut on the engine's hop, one on the browser's: every token arrives once, in order, the
// relay ends cleanly, and the frontend never holds more than its source window + 1.
import { afterEach, describe, expect, it } from 'vitest';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { openRelay, type Relay } from '../../src/stream/relay.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { closeAll, tcpNode } from '../integration/helpers.ts';
import { closeProxies, tcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    await closeProxies();
  }
});

const SOURCE_CREDIT = 16;

function portOf(node: LanemuxNode): number {
  return Number(new URL(node.address.replace('tcp://', 'http://')).port);
}

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

async function collect(anchor: StreamAnchor<string>): Promise<{ items: string[]; error: unknown }> {
  const items: string[] = [];
  try {
    for await (const v of anchor) items.push(v);
    return { items, error: null };
  } catch (error) {
    return { items, error };
  }
}

/** Send numbered tokens until `stop()` says so, then finalize: how many were sent, or the error. */
async function produce(sender: StreamSender<string>, stop: () => boolean): Promise<number | unknown> {
  let i = 0;
  try {
    while (!stop()) await sender.send(`${i++}`);
    await sender.finalize();
    return i;
  } catch (e) {
    return e;
  }
}

/** Engine → frontend ← browser, each link through its own proxy; one relayed stream flowing. */
async function setup() {
  // A small slot byte budget toward the engine: its sender waits for credit instead of queueing far ahead.
  const frontend = await tcpNode({ mux: { initialCredit: SOURCE_CREDIT, slotByteBudget: 1024 } });
  const engine = await tcpNode({ listen: false });
  const browser = await tcpNode({ listen: false, mux: { initialCredit: 32 } });
  const engineLink = await tcpProxy(portOf(frontend));
  const browserLink = await tcpProxy(portOf(frontend));
  await engine.connect(engineLink.address);
  await browser.connect(browserLink.address);
  const out = browser.createAnchor<string>();
  const r: Relay<string> = await openRelay<string>(frontend, out.handle);
  const sender = await engine.attachAnchor<string>(r.source.handle);
  let stop = false;
  let maxHeld = 0;
  const read = collect(out);
  const wrote = produce(sender, () => {
    maxHeld = Math.max(maxHeld, r.held);
    return stop;
  });
  return {
    frontend,
    engine,
    browser,
    engineLink,
    browserLink,
    r,
    read,
    wrote,
    finish: () => {
      stop = true;
    },
    maxHeld: () => maxHeld,
  };
}

/** Cut `link` once `r` relayed `after` more tokens; the dialler (`node`) links again once it saw the loss. */
async function cutOnce(node: LanemuxNode, link: TcpProxy, r: Relay<string>, after: number): Promise<void> {
  const start = r.relayed;
  await waitFor(() => r.relayed >= start + after, 10_000, 'tokens before the cut');
  let down = false;
  const off = node.onPeerState((e) => {
    if (e.type === 'down') down = true;
  });
  link.cut();
  await waitFor(() => down, 10_000, 'the link to be reported down');
  off();
  await node.connect(link.address);
}

describe('relay across a lost link (TCP, resume on both hops)', () => {
  it("survives a cut on the engine's hop: every token once, in order", { timeout: 30_000 }, async () => {
    const s = await setup();
    await cutOnce(s.engine, s.engineLink, s.r, 300);
    const after = s.r.relayed;
    await waitFor(() => s.r.relayed >= after + 300, 10_000, 'tokens after the resume');
    s.finish();
    const sent = await s.wrote;
    expect(typeof sent, String(sent)).toBe('number');
    const got = await s.read;
    expect(got.error).toBeNull();
    expect(got.items).toEqual(Array.from({ length: sent as number }, (_, k) => `${k}`));
    expect(await s.r.done).toBeNull();
    expect(metric(s.engine, 'streaming_resumed_streams_total')).toBeGreaterThan(0);
    expect(s.maxHeld()).toBeLessThanOrEqual(SOURCE_CREDIT + 2);
  });

  it("survives a cut on the browser's hop: every token once, in order", { timeout: 30_000 }, async () => {
    const s = await setup();
    await cutOnce(s.browser, s.browserLink, s.r, 300);
    const after = s.r.relayed;
    await waitFor(() => s.r.relayed >= after + 300, 10_000, 'tokens after the resume');
    s.finish();
    const sent = await s.wrote;
    expect(typeof sent, String(sent)).toBe('number');
    const got = await s.read;
    expect(got.error).toBeNull();
    expect(got.items).toEqual(Array.from({ length: sent as number }, (_, k) => `${k}`));
    expect(await s.r.done).toBeNull();
    expect(metric(s.frontend, 'streaming_resumed_streams_total')).toBeGreaterThan(0);
    expect(s.maxHeld()).toBeLessThanOrEqual(SOURCE_CREDIT + 1);
  });
});
