// The discovery conformance suite against the in-memory static store.
import { createStaticStore, staticDiscovery } from '../../src/discovery/static.ts';
import { describeDiscovery, TTL_MS } from './conformance.ts';

describeDiscovery('static', async () => ({
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
}));
