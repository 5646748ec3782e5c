// Edge behaviour of the Bun adapters (busy port, refused dial, HTTP on the WebSocket endpoint) and
// the Deno adapters refusing to run under Bun.
import { describe } from 'vitest';
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../../src/adapters/bun-ws.ts';
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../../src/adapters/deno-ws.ts';
import { adapterEdges } from '../adapter-edges.ts';

describe('bun adapters: edges', () => {
  adapterEdges({
    tcp: (o) => bunTcpTransport({ ...o, closeGraceMs: 100 }),
    wsServer: (o) => bunWebSocketServerTransport({ ...o, closeGraceMs: 100 }),
    foreign: [
      ['denoTcpTransport', () => denoTcpTransport()],
      ['denoWebSocketServerTransport', () => denoWebSocketServerTransport()],
    ],
  });
});
