// Edge behaviour of the Bun adapters (busy port, refused dial, HTTP on the WebSocket endpoint) and
// the Deno adapters refusing to run under Bun.
import { describe } from 'vitest';
import { bunTcpTransport } from '../../../src/transport/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../../src/transport/bun-ws.ts';
import { denoTcpTransport } from '../../../src/transport/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../../src/transport/deno-ws.ts';
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
