// Transport conformance over the memory adapter under `deno test` (checks the shim + core on Deno).
import { describe } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../../src/adapters/memory.ts';
import { transportConformance } from '../../transport/conformance.ts';

const network = createMemoryNetwork();
let n = 0;

describe('transport conformance on deno: memory', () => {
  transportConformance({
    name: 'memory',
    lanes: 4,
    reconnects: false,
    server: (at) => [
      memoryTransport({
        network,
        name: at === undefined ? `server-${++n}` : at.slice('memory://'.length),
        admissionLimit: 256 * 1024,
        maxPendingBytes: 1024 * 1024,
      }),
    ],
    client: () => [
      memoryTransport({ network, listen: false, admissionLimit: 256 * 1024, maxPendingBytes: 1024 * 1024 }),
    ],
  });
});
