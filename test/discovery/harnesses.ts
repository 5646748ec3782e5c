/**
 * The stores the discovery suites run against, one harness each: the in-memory static store, a real
 * etcd and a real nats-server with JetStream (started here, see test/support/). Each namespace is
 * a fresh store, key prefix or bucket, so no test sees another's records.
 */
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { Etcd3 } from 'etcd3';
import { etcdDiscovery } from '../../src/discovery/etcd.ts';
import { natsDiscovery } from '../../src/discovery/nats.ts';
import { DEFAULT_MAX_RECORD_BYTES } from '../../src/discovery/options.ts';
import { createStaticStore, staticDiscovery } from '../../src/discovery/static.ts';
import { startEtcd } from '../support/etcd-server.ts';
import { startNats } from '../support/nats-server.ts';
import { freePort } from '../support/server-process.ts';
import { TTL_MS, type DiscoveryHarness } from './conformance.ts';

export async function staticHarness(): Promise<DiscoveryHarness> {
  return {
    async space() {
      const store = createStaticStore();
      return {
        create: (o) => staticDiscovery({ store, ttlMs: TTL_MS, ...o }),
        writeRaw: async (hex, value) => store.writeRaw(hex, value),
      };
    },
    unavailable: (o) =>
      staticDiscovery({
        file: 'workers.json',
        readFile: () => Promise.reject(new Error('ENOENT: no such file or directory')),
        ...o,
      }),
    close: async () => undefined,
  };
}

let etcdSpaces = 0;

export async function etcdHarness(): Promise<DiscoveryHarness> {
  const server = await startEtcd();
  const dead = await freePort();
  const raw = new Etcd3({ hosts: server.host });
  return {
    async space() {
      const prefix = `/lanemux-test/${++etcdSpaces}/`;
      const base = { hosts: server.host, prefix, ttlMs: TTL_MS };
      return {
        create: (o) => etcdDiscovery({ ...base, ...o }),
        writeRaw: async (hex, value) => {
          await raw.put(prefix + hex).value(value);
        },
        async loseLease(hex) {
          const { kvs } = await raw.get(prefix + hex).exec();
          await raw.leaseClient.leaseRevoke({ ID: kvs[0]!.lease });
        },
        childOptions: base,
      };
    },
    unavailable: (o) => etcdDiscovery({ hosts: `127.0.0.1:${dead}`, ...o }),
    restart: () => server.restart(),
    stop: () => server.stop(),
    start: () => server.start(),
    async close() {
      raw.close();
      await server.close();
    },
  };
}

let natsBuckets = 0;

export async function natsHarness(): Promise<DiscoveryHarness> {
  const server = await startNats();
  const dead = await freePort();
  const nc = await connect({ servers: server.url, reconnectTimeWait: 250, maxReconnectAttempts: -1 });
  const kvm = new Kvm(nc);
  // The harness's own connection must be back before the next test writes through it: a request
  // sent while disconnected is lost and only times out.
  const reconnected = async (): Promise<void> => {
    for await (const s of nc.status()) if (s.type === 'reconnect') return;
  };
  return {
    async space() {
      const bucket = `lanemux_test_${++natsBuckets}`;
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
      const back = reconnected();
      await server.restart();
      await back;
    },
    stop: () => server.stop(),
    async start() {
      const back = reconnected();
      await server.start();
      await back;
    },
    async close() {
      await nc.close();
      await server.close();
    },
  };
}
