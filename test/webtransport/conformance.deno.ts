// Transport conformance over WebTransport, Deno → Deno: the Deno server adapter (Deno.QuicEndpoint)
// and the standard-API client adapter (Deno's global WebTransport), with 1 and 4 lanes, under
// `deno test` through the vitest shim (test/portable). Spawned by deno-conformance.test.ts; by hand:
//   DENO_NO_UPDATE_CHECK=1 node_modules/.bin/deno test --no-check --unstable-net --allow-net \
//     --allow-read --allow-env test/webtransport/conformance.deno.ts
import { describe } from 'vitest';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { webTransportClientTransport } from '../../src/adapters/webtransport.ts';
import { transportConformance } from '../transport/conformance.ts';

const cert = await createDevCertificate();
const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024, closeGraceMs: 200 };
// Deno 2.9.6 never frees a closed endpoint's port: the restart case takes the lingering endpoint over.
const reuse = { reuseEndpointWithinMs: 2_000 };
// The client adapter reconnects (messenger `reconnect` defaults to true): fast back-off for tests.
const backoff = { minReconnectionDelay: 20, reconnectionJitter: 30, maxReconnectionDelay: 200 };

for (const lanes of [1, 4]) {
  describe(`transport conformance: webtransport deno→deno, ${lanes} lane${lanes > 1 ? 's' : ''}`, () => {
    transportConformance({
      name: `webtransport-deno-${lanes}`,
      lanes,
      reconnects: true,
      server: (at) => [
        webTransportServerTransport({
          cert: cert.certPem,
          key: cert.keyPem,
          port: at === undefined ? 0 : Number(new URL(at).port),
          ...limits,
          ...reuse,
        }),
      ],
      client: () => [
        webTransportClientTransport({ serverCertificateHashes: [cert.serverCertificateHash], ...limits, ...backoff }),
      ],
    });
  });
}
