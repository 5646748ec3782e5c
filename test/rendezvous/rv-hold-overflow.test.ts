// Regression (review finding): after a rendezvous record the producer, within its credit, sends later records
// eagerly; the receiver keeps them in the slot's hold, which is capped at slotByteBudget bytes,
// while the sender only counts records. A conforming producer then trips holdOverflow and the
// stream dies with ProtocolError, although the same records without the singleton ahead would be fine.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, tcpNode } from '../integration/helpers.ts';
import { readAll } from '../support/read-all.ts';

afterEach(closeAll);

describe('hold after a singleton', () => {
  it('records within credit after a big record are not a protocol fault', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const a = consumer.createAnchor<Uint8Array>();
    const s = await producer.attachAnchor<Uint8Array>(a.handle);
    const read = readAll(a).then(
      (v) => ({ n: v.length, e: null as unknown }),
      (e: unknown) => ({ n: -1, e }),
    );
    await s.send(new Uint8Array(16 * 1024 * 1024)); // singleton: pulled in 32 chunks
    let sendError: unknown = null;
    try {
      // 30 records of 50 KiB (each under the 60 KiB batch cap), within the default credit of 32.
      for (let i = 0; i < 30; i++) await s.send(new Uint8Array(50 * 1024));
      await s.finalize();
    } catch (e) {
      sendError = e;
    }
    const r = await read;
    expect(consumer.metrics()['velo_streaming_mux_hold_overflow_total'] ?? 0).toBe(0);
    expect(sendError).toBe(null);
    expect(r.e).toBe(null);
    expect(r.n).toBe(31);
  }, 20_000);
});
