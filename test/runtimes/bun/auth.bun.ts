// `authenticate` on the Bun server adapters (Bun.serve WebSocket, Bun TCP), the shared suite.
import { describe } from 'vitest';
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../../src/adapters/bun-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { authSuite } from '../../transport/auth-suite.ts';

const fast = { minReconnectionDelay: 20, reconnectionJitter: 20, maxReconnectionDelay: 100 };

describe('authenticate on bun-ws-server, partysocket client', () => {
  authSuite({
    name: 'bun-ws-server',
    upgrade: true,
    reconnects: true,
    server: (authenticate) => bunWebSocketServerTransport({ authenticate, closeGraceMs: 100 }),
    client: (credential) => webSocketClientTransport({ ...fast, credential }),
  });
});

describe('authenticate on Bun TCP', () => {
  authSuite({
    name: 'bun-tcp',
    upgrade: false,
    reconnects: false,
    server: (authenticate) => bunTcpTransport({ authenticate, closeGraceMs: 100 }),
    client: (credential) => bunTcpTransport({ listen: false, credential, closeGraceMs: 100 }),
  });
});
