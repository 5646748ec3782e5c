// Transport conformance over TLS (tcpTransport({ tls }), tls://), 1 and 8 lanes: everything plain TCP
// guarantees holds inside TLS too (order, admission, restarts, health checks, close).
import { describe } from 'vitest';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { transportConformance } from './conformance.ts';

const cert = await createDevCertificate();
const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024, closeGraceMs: 200 };

for (const lanes of [1, 8]) {
  describe(`transport conformance: tls, ${lanes} lane${lanes > 1 ? 's' : ''}`, () => {
    transportConformance({
      name: `tls-${lanes}`,
      lanes,
      reconnects: false,
      server: (at) => [
        tcpTransport({
          host: '127.0.0.1',
          port: at === undefined ? 0 : Number(new URL(at).port),
          tls: { key: cert.keyPem, cert: cert.certPem },
          ...limits,
        }),
      ],
      client: () => [tcpTransport({ listen: false, tls: { ca: cert.certPem }, ...limits })],
    });
  });
}
