// The discovery conformance suite against a real nats-server with JetStream (Debian's, started by the test).
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { natsDiscovery } from '../../src/discovery/nats.ts';
import { startNats, type NatsServer } from '../support/nats-server.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeDiscovery, sample } from './conformance.ts';
import { natsHarness } from './harnesses.ts';
import { spawnRegistrant } from './spawn-registrant.ts';

describeDiscovery('nats', natsHarness, {
  restart: true,
  loseLease: true,
  spawnRegistrant: (space, hex) => spawnRegistrant('nats', space.childOptions!, hex),
});

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
