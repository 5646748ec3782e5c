// The discovery conformance suite against a real nats-server with JetStream (Debian's, started by the test).
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { natsDiscovery } from '../../src/discovery/nats.ts';
import { DEFAULT_MAX_RECORD_BYTES } from '../../src/discovery/options.ts';
import { startNats, type NatsServer } from '../support/nats-server.ts';
import { freePort } from '../support/server-process.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeDiscovery, sample, TTL_MS } from './conformance.ts';
import { spawnRegistrant } from './spawn-registrant.ts';

let n = 0;

describeDiscovery(
  'nats',
  async () => {
    const server = await startNats();
    const dead = await freePort();
    const nc = await connect({ servers: server.url, reconnectTimeWait: 250, maxReconnectAttempts: -1 });
    const kvm = new Kvm(nc);
    return {
      async space() {
        const bucket = `lanemux_test_${++n}`;
        // Created here, so its limits do not depend on which client of the test opens it first.
        const kv = await kvm.create(bucket, { ttl: TTL_MS, history: 1, maxValueSize: DEFAULT_MAX_RECORD_BYTES });
        const base = { servers: server.url, bucket, ttlMs: TTL_MS, connectOptions: { reconnectTimeWait: 250 } };
        return {
          create: (o) => natsDiscovery({ ...base, ...o }),
          writeRaw: async (hex, value) => {
            await kv.put(hex, value);
          },
          // Without per-key TTLs (server 2.9) a lost lease is a record gone: as if it had expired.
          loseLease: (hex) => kv.delete(hex),
          childOptions: base,
        };
      },
      unavailable: (o) => natsDiscovery({ servers: `nats://127.0.0.1:${dead}`, ...o }),
      async restart() {
        // The harness's own connection must be back before the next test writes through it: a
        // request sent while disconnected is lost and only times out.
        const back = (async () => {
          for await (const s of nc.status()) if (s.type === 'reconnect') return;
        })();
        await server.restart();
        await back;
      },
      async close() {
        await nc.close();
        await server.close();
      },
    };
  },
  {
    restart: true,
    loseLease: true,
    spawnRegistrant: (space, hex) => spawnRegistrant('nats', space.childOptions!, hex),
  },
);

describe('nats discovery buckets', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await startNats();
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  it('an existing bucket keeps its own TTL (the register does not change it); a bucket without a TTL is refused', async () => {
    const nc = await connect({ servers: server.url });
    try {
      const kvm = new Kvm(nc);
      await kvm.create('lanemux_ttl', { ttl: 60_000, history: 1 });
      const d = natsDiscovery({ servers: server.url, bucket: 'lanemux_ttl', ttlMs: 5_000 });
      await d.register(sample('00000000000000a1'));
      const kv = await kvm.open('lanemux_ttl');
      expect((await kv.status()).ttl).toBe(60_000);
      await d.close();

      await kvm.create('lanemux_no_ttl', { history: 1 });
      const forever = natsDiscovery({ servers: server.url, bucket: 'lanemux_no_ttl' });
      await expect(forever.resolve('00000000000000a1')).rejects.toThrow(/has no TTL/);
      await forever.close();
    } finally {
      await nc.close();
    }
  });
});
