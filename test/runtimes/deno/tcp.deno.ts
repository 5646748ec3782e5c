// Transport conformance over the Deno TCP adapter (Deno.listen / Deno.connect), 1 and 8 lanes,
// under `deno test` (vitest mapped to the portable shim by deno.json).
import { describe } from 'vitest';
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { transportConformance } from '../../transport/conformance.ts';

const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024, closeGraceMs: 200 };

for (const lanes of [1, 8]) {
  describe(`transport conformance on deno: deno-tcp, ${lanes} lane${lanes > 1 ? 's' : ''}`, () => {
    transportConformance({
      name: `deno-tcp-${lanes}`,
      lanes,
      reconnects: false,
      server: (at) => [
        denoTcpTransport({ host: '127.0.0.1', port: at === undefined ? 0 : Number(new URL(at).port), ...limits }),
      ],
      client: () => [denoTcpTransport({ listen: false, ...limits })],
    });
  });
}
