// Transport conformance over the Bun TCP adapter (Bun.listen / Bun.connect), 1 and 8 lanes, under
// `bun test` (Bun maps `vitest` imports to bun:test itself).
import { describe } from 'vitest';
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { transportConformance } from '../../transport/conformance.ts';

const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024, closeGraceMs: 200 };

for (const lanes of [1, 8]) {
  describe(`transport conformance on bun: bun-tcp, ${lanes} lane${lanes > 1 ? 's' : ''}`, () => {
    transportConformance({
      name: `bun-tcp-${lanes}`,
      lanes,
      reconnects: false,
      server: (at) => [
        bunTcpTransport({ host: '127.0.0.1', port: at === undefined ? 0 : Number(new URL(at).port), ...limits }),
      ],
      client: () => [bunTcpTransport({ listen: false, ...limits })],
    });
  });
}
