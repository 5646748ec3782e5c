// The discovery conformance suite against a real etcd (Debian's etcd-server, started by the test).
import { Etcd3 } from 'etcd3';
import { etcdDiscovery } from '../../src/discovery/etcd.ts';
import { startEtcd } from '../support/etcd-server.ts';
import { freePort } from '../support/server-process.ts';
import { describeDiscovery, TTL_MS } from './conformance.ts';
import { spawnRegistrant } from './spawn-registrant.ts';

let n = 0;

describeDiscovery(
  'etcd',
  async () => {
    const server = await startEtcd();
    const dead = await freePort();
    const raw = new Etcd3({ hosts: server.host });
    return {
      async space() {
        const prefix = `/lanemux-test/${++n}/`;
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
      async close() {
        raw.close();
        await server.close();
      },
    };
  },
  {
    restart: true,
    loseLease: true,
    reportsLeaseLoss: true,
    spawnRegistrant: (space, hex) => spawnRegistrant('etcd', space.childOptions!, hex),
  },
);
