// Transport conformance over Node TCP, with 1 lane and with 8 lanes (one TCP connection per lane).
import { describe } from 'vitest';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { transportConformance } from './conformance.ts';

const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024, closeGraceMs: 200 };

function portOf(address: string): number {
  return Number(new URL(address).port);
}

for (const lanes of [1, 8]) {
  describe(`transport conformance: tcp, ${lanes} lane${lanes > 1 ? 's' : ''}`, () => {
    transportConformance({
      name: `tcp-${lanes}`,
      lanes,
      reconnects: false,
      server: (at) => [tcpTransport({ host: '127.0.0.1', port: at === undefined ? 0 : portOf(at), ...limits })],
      client: () => [tcpTransport({ listen: false, ...limits })],
    });
  });
}
