// Oversized records over real TCP (issue 5): a record larger than the batch cap goes alone as a
// rendezvous transfer that the receiver pulls in chunks, without holding the lane; a receiver with
// `stagedPayloadMax` refuses a larger transfer before allocating it and ends only that stream.
import { afterEach, describe, expect, it } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import { closeAll, tcpNode } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(closeAll);

/** A deterministic 5 MiB pattern (each byte depends on its offset, so a misplaced chunk shows). */
function pattern(size: number, seed: number): Uint8Array {
  const b = new Uint8Array(size);
  let x = seed >>> 0;
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

describe('rendezvous transfers over TCP', () => {
  it('a 5 MiB record in the middle of a stream arrives intact and in order while 100 other streams keep flowing', async () => {
    const consumer = await tcpNode({ mux: { initialCredit: 16 } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: 16 } });
    await producer.connect(consumer.address);

    const big = pattern(5 * 1024 * 1024, 7);
    const bigAnchor = consumer.createAnchor<string | Uint8Array>();
    const bigSender = await producer.attachAnchor<string | Uint8Array>(bigAnchor.handle);
    const bigRead = readAll(bigAnchor);

    const others: Array<{ anchor: StreamAnchor<string>; read: Promise<string[]> }> = [];
    for (let i = 0; i < 100; i++) {
      const anchor = consumer.createAnchor<string>();
      others.push({ anchor, read: readAll(anchor) });
    }
    const senders = await Promise.all(others.map((o) => producer.attachAnchor<string>(o.anchor.handle)));

    for (let i = 0; i < 10; i++) await bigSender.send(`head${i}`);
    await bigSender.send(big);
    // The producer goes on at once: the fence lifts when the descriptor is admitted, not when the
    // receiver has pulled the record; later items wait in the receiver's hold.
    const tail = (async () => {
      for (let i = 0; i < 10; i++) await bigSender.send(`tail${i}`);
      await bigSender.finalize();
    })();
    await Promise.all(
      senders.map(async (s, k) => {
        for (let i = 0; i < 50; i++) await s.send(`s${k}.${i}`);
        await s.finalize();
      }),
    );
    const otherItems = await Promise.all(others.map((o) => o.read));
    otherItems.forEach((items, k) => expect(items).toEqual(Array.from({ length: 50 }, (_, i) => `s${k}.${i}`)));
    await tail;
    const got = await bigRead;
    expect(got).toHaveLength(21);
    expect(got.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => `head${i}`));
    expect(got[10]).toBeInstanceOf(Uint8Array);
    expect(sameBytes(got[10] as Uint8Array, big)).toBe(true);
    expect(got.slice(11)).toEqual(Array.from({ length: 10 }, (_, i) => `tail${i}`));
    const p = producer.metrics();
    expect(p['velo_streaming_mux_rendezvous_singletons_total']).toBe(1);
    await waitFor(
      () => producer.metrics()['velo_streaming_mux_staged_out_bytes'] === 0,
      5_000,
      'staged bytes released',
    );
    expect(consumer.metrics()['velo_streaming_mux_staged_in_bytes']).toBe(0);
  });

  it('a transfer over the receiver’s stagedPayloadMax ends only its own stream, with an error naming both sizes; the producer is cancelled', async () => {
    const consumer = await tcpNode({ mux: { stagedPayloadMax: 1024 * 1024 } });
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);

    const victim = consumer.createAnchor<string | Uint8Array>();
    const bystander = consumer.createAnchor<string>();
    const vs = await producer.attachAnchor<string | Uint8Array>(victim.handle);
    const bs = await producer.attachAnchor<string>(bystander.handle);
    const victimRead = readAll(victim).then(
      (items) => ({ items, error: null as unknown }),
      (error: unknown) => ({ items: [] as unknown[], error }),
    );
    const bystanderRead = readAll(bystander);

    await vs.send('before');
    await vs.send(new Uint8Array(2 * 1024 * 1024));
    const r = await victimRead;
    expect(isLanemuxError(r.error)).toBe(true);
    const err = r.error as Error & { code: string };
    expect(err.code).toBe('ERR_TRANSPORT_ERROR');
    // Both sizes: what the transfer states (the 2 MiB record plus its batch framing) and the limit.
    const stated = Number(/states (\d+) bytes/.exec(err.message)?.[1]);
    expect(stated).toBeGreaterThan(2 * 1024 * 1024);
    expect(stated).toBeLessThan(2 * 1024 * 1024 + 64);
    expect(err.message).toContain(`stagedPayloadMax of ${1024 * 1024} bytes`);
    // The producer learns through LifecycleSlot{cancel}: its cancel signal fires, its next send fails.
    await waitFor(() => vs.cancelSignal.aborted, 5_000, 'producer cancelled');
    await expect(vs.send('after')).rejects.toThrow();
    // The other stream on the same connection is untouched.
    for (let i = 0; i < 20; i++) await bs.send(`b${i}`);
    await bs.finalize();
    expect(await bystanderRead).toEqual(Array.from({ length: 20 }, (_, i) => `b${i}`));
    expect(consumer.metrics()['velo_streaming_mux_staged_refused_total']).toBe(1);
    await waitFor(() => producer.metrics()['velo_streaming_mux_staged_out_bytes'] === 0, 5_000, 'sender copy released');
  });

  it('an index reused while the old slot waits for its rendezvous record: the old slot moves aside and both streams complete', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const big = pattern(3 * 1024 * 1024, 11);
    const a1 = consumer.createAnchor<string | Uint8Array>();
    const r1 = readAll(a1);
    const s1 = await producer.attachAnchor<string | Uint8Array>(a1.handle);
    await s1.send(big);
    await s1.finalize(); // the terminal and close go eagerly; the index is free at once (LIFO)
    const a2 = consumer.createAnchor<string>();
    const r2 = readAll(a2);
    const s2 = await producer.attachAnchor<string>(a2.handle);
    for (let i = 0; i < 5; i++) await s2.send(`n${i}`);
    await s2.finalize();
    expect(await r2).toEqual(['n0', 'n1', 'n2', 'n3', 'n4']);
    const got = await r1;
    expect(got).toHaveLength(1);
    expect(sameBytes(got[0] as Uint8Array, big)).toBe(true);
    expect(consumer.metrics()['velo_streaming_mux_records_dropped_total{reason="slot_collision"}']).toBe(0);
  });
});
