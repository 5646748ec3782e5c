// A watch as every adapter shares it (the core's queue), driven through the static store.
import { describe, expect, it } from 'vitest';
import { DiscoveryError } from '../../src/discovery/errors.ts';
import { createStaticStore, staticDiscovery } from '../../src/discovery/static.ts';
import { WatchQueue } from '../../src/discovery/watch-queue.ts';
import { sample, show, take } from './conformance.ts';

const hex = (n: number): string => n.toString(16).padStart(16, '0');

describe('discovery watch', () => {
  it('a consumer more than maxQueue events behind gets every queued event, then ERR_DISCOVERY_WATCH_OVERFLOW', async () => {
    const store = createStaticStore();
    const writer = staticDiscovery({ store });
    const writers = [1, 2, 3, 4].map(() => staticDiscovery({ store }));
    const w = staticDiscovery({ store }).watch({ maxQueue: 3 });
    // The snapshot (empty) is delivered on the next tick.
    expect((await take(w, 1)).map(show)).toEqual(['synced']);
    for (const [i, d] of writers.entries()) await d.register(sample(hex(i + 1)));
    expect(await w.next()).toMatchObject({ value: { type: 'put', workerId: 1n } });
    expect(await w.next()).toMatchObject({ value: { type: 'put', workerId: 2n } });
    expect(await w.next()).toMatchObject({ value: { type: 'put', workerId: 3n } });
    const err = await w.next().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiscoveryError);
    expect(err).toMatchObject({ code: 'ERR_DISCOVERY_WATCH_OVERFLOW', retryable: true });
    expect(await w.next()).toEqual({ done: true, value: undefined });
    // A new watch starts from a fresh snapshot.
    const again = staticDiscovery({ store }).watch();
    expect((await take(again, 5)).map(show)).toEqual([
      `put ${hex(1)} zone=eu-a`,
      `put ${hex(2)} zone=eu-a`,
      `put ${hex(3)} zone=eu-a`,
      `put ${hex(4)} zone=eu-a`,
      'synced',
    ]);
    again.close();
    await Promise.all([writer, ...writers].map((d) => d.close()));
  });

  it('an aborted signal, close(), break and the client closing each end a watch; a pending next() finishes done', async () => {
    const store = createStaticStore();
    const d = staticDiscovery({ store });
    const ac = new AbortController();
    const byAbort = d.watch({ signal: ac.signal });
    await take(byAbort, 1);
    const pending = byAbort.next();
    ac.abort();
    expect(await pending).toEqual({ done: true, value: undefined });

    const aborted = new AbortController();
    aborted.abort();
    expect(await d.watch({ signal: aborted.signal }).next()).toEqual({ done: true, value: undefined });

    const byClose = d.watch();
    await take(byClose, 1);
    const pending2 = byClose.next();
    byClose.close();
    expect(await pending2).toEqual({ done: true, value: undefined });

    const byBreak = d.watch();
    for await (const e of byBreak) if (e.type === 'synced') break;
    expect(await byBreak.next()).toEqual({ done: true, value: undefined });

    const byClient = d.watch();
    await take(byClient, 1);
    const pending3 = byClient.next();
    await d.close();
    expect(await pending3).toEqual({ done: true, value: undefined });
    await expect(d.watch().next()).rejects.toMatchObject({ code: 'ERR_DISCOVERY_CLOSED' });
  });

  it('room() holds a snapshot page back until the consumer has read half the queue', async () => {
    const q = new WatchQueue(4, () => undefined);
    for (let i = 0; i < 4; i++) q.push({ type: 'delete', workerId: BigInt(i) });
    let roomy = false;
    const room = q.room().then(() => {
      roomy = true;
    });
    await q.next();
    await Promise.resolve();
    expect(roomy).toBe(false);
    await q.next();
    await room;
    expect(roomy).toBe(true);
  });

  it('an invalid maxQueue is a ConfigError', () => {
    const d = staticDiscovery();
    expect(() => d.watch({ maxQueue: 0 })).toThrow(/maxQueue/);
  });
});
