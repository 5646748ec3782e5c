// Over real TCP sockets: MPSC senders resume across lost links (docs/protocol.md §8.3). Two producer
// nodes, each behind its own proxy, feed one MPSC anchor with three senders; the proxies are cut a few
// times while items flow, each cut followed by a reconnect. Every sender's items arrive exact and in
// order, every sender's part ends finalized (no dropped event), live slots return to 0.
import { afterEach, describe, expect, it } from 'vitest';
import type { MpscEvent } from '../../src/stream/mpsc-anchor.ts';
import type { MpscSender } from '../../src/stream/mpsc-sender.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { closeProxies, tcpProxy } from '../support/tcp-proxy.ts';
import { waitFor } from '../support/wait-for.ts';
import { closeAll, tcpNode } from './helpers.ts';

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    await closeProxies();
  }
});

function portOf(node: LanemuxNode): number {
  return Number(new URL(node.address.replace('tcp://', 'http://')).port);
}

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

/** Send `n` numbered items, then finalize; the sender's own outcome. */
async function produce(sender: MpscSender<string>, n: number): Promise<unknown> {
  try {
    for (let i = 0; i < n; i++) await sender.send(`${sender.senderId}:${i}`);
    await sender.finalize();
    return null;
  } catch (e) {
    return e;
  }
}

describe('MPSC resume over TCP', () => {
  it('3 MPSC senders on 2 nodes behind cut proxies: every sender exact and in order, none dropped', {
    timeout: 60_000,
  }, async () => {
    const CUTS = 6;
    const N = 2000;
    const consumer = await tcpNode({ mux: { initialCredit: 16 } });
    const producers = [await tcpNode({ listen: false }), await tcpNode({ listen: false })];
    const links = [await tcpProxy(portOf(consumer)), await tcpProxy(portOf(consumer))];
    const peers = [await producers[0]!.connect(links[0]!.address), await producers[1]!.connect(links[1]!.address)];
    const anchor = consumer.createMpscAnchor<string>();
    const senders = [
      await producers[0]!.attachMpscAnchor<string>(anchor.handle),
      await producers[0]!.attachMpscAnchor<string>(anchor.handle),
      await producers[1]!.attachMpscAnchor<string>(anchor.handle),
    ];
    anchor.seal();
    const events: MpscEvent<string>[] = [];
    let items = 0;
    let ended = false;
    const reading = (async () => {
      for await (const e of anchor) {
        events.push(e);
        if (e.kind === 'item') items++;
      }
      ended = true;
    })();
    const writes = senders.map((s) => produce(s, N));
    const downs = [0, 0];
    const offs = producers.map((p, i) =>
      p.onPeerState((e) => {
        if (e.peer === peers[i] && e.type === 'down') downs[i]!++;
      }),
    );
    for (let cut = 1; cut <= CUTS; cut++) {
      await waitFor(() => items >= cut * 600 || ended, 10_000, `${cut * 600} items read`);
      // Alternate the links; the last cut takes both.
      const which = cut === CUTS ? [0, 1] : [cut % 2];
      const before = which.map((i) => downs[i]!);
      for (const i of which) links[i]!.cut();
      await waitFor(() => which.every((i, k) => downs[i]! > before[k]!));
      for (const i of which) await producers[i]!.connect(links[i]!.address);
    }
    for (const off of offs) off();
    await reading;
    expect(await Promise.all(writes)).toEqual([null, null, null]);
    for (const s of senders)
      expect(events.flatMap((e) => (e.kind === 'item' && e.sender === s.senderId ? [e.value] : []))).toEqual(
        Array.from({ length: N }, (_, k) => `${s.senderId}:${k}`),
      );
    expect(events.filter((e) => e.kind !== 'item').map((e) => e.kind)).toEqual(['finalized', 'finalized', 'finalized']);
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBeGreaterThanOrEqual(CUTS);
    await waitFor(
      () => consumer.metricsRegistry.liveSlots === 0 && producers.every((p) => p.metricsRegistry.liveSlots === 0),
    );
  });
});
