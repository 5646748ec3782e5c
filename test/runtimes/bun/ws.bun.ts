// Transport conformance over WebSocket on Bun: the Bun.serve server adapter and the WHATWG client
// adapter (partysocket over Bun's global WebSocket), under `bun test`.
import { describe } from 'vitest';
import { bunWebSocketServerTransport } from '../../../src/adapters/bun-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { transportConformance } from '../../transport/conformance.ts';
import { wsServerAdmission } from '../ws-server-admission.ts';

const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024 };

describe('transport conformance on bun: bun-ws server + partysocket client', () => {
  transportConformance({
    name: 'bun-ws',
    lanes: 2,
    reconnects: true,
    server: (at) => [
      bunWebSocketServerTransport({
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

describe('bun-ws server admission toward a client that stops reading', () => {
  wsServerAdmission((l) => bunWebSocketServerTransport({ closeGraceMs: 100, ...l }));
});
