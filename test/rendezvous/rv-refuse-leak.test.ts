// Regression (review finding): a refused rendezvous transfer ends the consumer's stream and sends only
// LifecycleSlot{cancel}; no CloseSlot follows, so the producer's slot stays live for good.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, tcpNode } from '../integration/helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(closeAll);

describe('refused transfer', () => {
  it('the producer’s slot is freed after a refusal (live slots back to 0 on both sides)', async () => {
    const consumer = await tcpNode({ mux: { stagedPayloadMax: 1024 * 1024 } });
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const a = consumer.createAnchor<Uint8Array>();
    const s = await producer.attachAnchor<Uint8Array>(a.handle);
    const read = readAll(a).catch((e: unknown) => e);
    await s.send(new Uint8Array(2 * 1024 * 1024));
    await read;
    await waitFor(() => s.cancelSignal.aborted, 5_000, 'producer cancelled');
    await expect(s.send(new Uint8Array(1))).rejects.toThrow();
    await s.finalize().catch(() => {});
    expect(consumer.metricsRegistry.liveSlots).toBe(0);
    await waitFor(
      () => producer.metricsRegistry.liveSlots === 0,
      2_000,
      `producer live slots 0 (now ${producer.metricsRegistry.liveSlots})`,
    );
  });
});
