// Half-sent frames over the Bun TCP adapter (the shared suite, test/transport/frame-bounds-suite.ts).
import { describe } from 'vitest';
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { frameBoundsSuite } from '../../transport/frame-bounds-suite.ts';

const bun = (globalThis as unknown as { Bun: { gc(full: boolean): void } }).Bun;

describe('incomplete frames over Bun TCP', () => {
  frameBoundsSuite({
    name: 'bun-tcp',
    attackers: 100,
    server: () => bunTcpTransport({ port: 0, closeGraceMs: 200 }),
    client: () => bunTcpTransport({ listen: false, closeGraceMs: 200 }),
    memory: () => process.memoryUsage().arrayBuffers,
    gc: async () => {
      bun.gc(true);
      await new Promise((r) => setTimeout(r, 20));
      bun.gc(true);
    },
  });
});
