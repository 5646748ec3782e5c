// The transport conformance suite in Chromium (vitest aliased to test/portable/vitest.ts by vite):
// clients are the product webTransportClientTransport; the listening side reaches them through
// relay-server.deno.ts (a browser cannot listen). Run with globalThis.lanemuxWtConformance.run().
import { describe } from 'vitest';
import { runCollected, type TestResult } from '../../portable/vitest.ts';
import { certificateHashFromHex } from '../../../src/adapters/dev-cert.ts';
import { webTransportClientTransport } from '../../../src/adapters/webtransport.ts';
import { transportConformance } from '../../transport/conformance.ts';
import { relayListenerTransport } from './relay-listener.ts';

const config = { relay: '', hashHex: '' };
const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024, closeGraceMs: 200 };
// The client adapter reconnects (messenger `reconnect` defaults to true): fast back-off for tests.
const backoff = { minReconnectionDelay: 20, reconnectionJitter: 30, maxReconnectionDelay: 200 };
let servers = 0;

for (const lanes of [1, 4]) {
  describe(`transport conformance: webtransport chromium→deno, ${lanes} lane${lanes > 1 ? 's' : ''}`, () => {
    transportConformance({
      name: `webtransport-chromium-${lanes}`,
      lanes,
      reconnects: true,
      server: (at) => [
        relayListenerTransport({
          relay: config.relay,
          // A restart listens at the same address: the same relay id.
          id: at === undefined ? `s${++servers}` : (new URL(at).pathname.split('/').pop() as string),
          hashes: [certificateHashFromHex(config.hashHex)],
          ...limits,
        }),
      ],
      client: () => [
        webTransportClientTransport({
          serverCertificateHashes: [certificateHashFromHex(config.hashHex)],
          ...limits,
          ...backoff,
        }),
      ],
    });
  });
}

export interface ConformanceApi {
  run(o: {
    relay: string;
    hashHex: string;
    filter?: string;
  }): Promise<{ passed: number; failed: number; results: TestResult[] }>;
}

const api: ConformanceApi = {
  async run(o) {
    config.relay = o.relay;
    config.hashHex = o.hashHex;
    const r = await runCollected(o.filter === undefined ? {} : { filter: o.filter });
    return { passed: r.passed, failed: r.failed, results: [...r.results] };
  },
};
(globalThis as { lanemuxWtConformance?: ConformanceApi }).lanemuxWtConformance = api;
