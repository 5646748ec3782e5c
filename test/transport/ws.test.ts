// Transport conformance over WebSocket: `ws` server adapter + WHATWG client adapter (partysocket),
// with `ws` injected as the WebSocket constructor as Node 20 requires.
import { describe } from 'vitest';
import WebSocket from 'ws';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { transportConformance } from './conformance.ts';

const limits = { highWaterMark: 256 * 1024, maxPendingBytes: 1024 * 1024 };

describe('transport conformance: websocket (ws server + partysocket client)', () => {
  transportConformance({
    name: 'ws',
    lanes: 2,
    reconnects: true,
    server: (at) => [
      webSocketServerTransport({
        host: '127.0.0.1',
        port: at === undefined ? 0 : Number(new URL(at).port),
        closeGraceMs: 200,
        ...limits,
      }),
    ],
    client: () => [
      webSocketClientTransport({
        WebSocket: WebSocket as never,
        minReconnectionDelay: 20,
        reconnectionJitter: 30,
        maxReconnectionDelay: 200,
        ...limits,
      }),
    ],
  });
});
