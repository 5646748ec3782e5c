// Transport conformance over WebSocket on Deno: the Deno.serve server adapter and the WHATWG client
// adapter (partysocket over Deno's global WebSocket), under `deno test`.
import { describe } from 'vitest';
import { denoWebSocketServerTransport } from '../../../src/adapters/deno-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { transportConformance } from '../../transport/conformance.ts';
import { wsServerAdmission } from '../ws-server-admission.ts';

const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024 };

describe('transport conformance on deno: deno-ws server + partysocket client', () => {
  transportConformance({
    name: 'deno-ws',
    lanes: 2,
    reconnects: true,
    // Deno cannot pause reading a server WebSocket (no API for it).
    pauses: false,
    server: (at) => [
      denoWebSocketServerTransport({
        host: '127.0.0.1',
        port: at === undefined ? 0 : Number(new URL(at).port),
        closeGraceMs: 200,
        ...limits,
      }),
    ],
    client: () => [
      webSocketClientTransport({
        minReconnectionDelay: 20,
        reconnectionJitter: 30,
        maxReconnectionDelay: 200,
        ...limits,
      }),
    ],
  });
});

describe('deno-ws server admission toward a client that stops reading', () => {
  wsServerAdmission((l) => denoWebSocketServerTransport({ closeGraceMs: 100, drainPollMs: 2, ...l }));
});
