// Edge behaviour of the Deno adapters (busy port, refused dial, HTTP on the WebSocket endpoint) and
// the Bun adapters refusing to run under Deno.
import { describe } from 'vitest';
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../../src/adapters/bun-ws.ts';
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../../src/adapters/deno-ws.ts';
import { adapterEdges } from '../adapter-edges.ts';

describe('deno adapters: edges', () => {
  adapterEdges({
    tcp: (o) => denoTcpTransport({ ...o, closeGraceMs: 100 }),
    wsServer: (o) => denoWebSocketServerTransport({ ...o, closeGraceMs: 100 }),
    foreign: [
      ['bunTcpTransport', () => bunTcpTransport()],
      ['bunWebSocketServerTransport', () => bunWebSocketServerTransport()],
    ],
  });
});
