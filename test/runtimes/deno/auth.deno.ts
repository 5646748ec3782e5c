// `authenticate` on the Deno server adapters (Deno.serve WebSocket, Deno TCP), the shared suite.
import { describe } from 'vitest';
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../../src/adapters/deno-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { authSuite } from '../../transport/auth-suite.ts';

const fast = { minReconnectionDelay: 20, reconnectionJitter: 20, maxReconnectionDelay: 100 };

describe('authenticate on deno-ws-server, partysocket client', () => {
  authSuite({
    name: 'deno-ws-server',
    upgrade: true,
    reconnects: true,
    server: (authenticate) => denoWebSocketServerTransport({ authenticate, closeGraceMs: 100 }),
    client: (credential) => webSocketClientTransport({ ...fast, credential }),
  });
});

describe('authenticate on Deno TCP', () => {
  authSuite({
    name: 'deno-tcp',
    upgrade: false,
    reconnects: false,
    server: (authenticate) => denoTcpTransport({ authenticate, closeGraceMs: 100 }),
    client: (credential) => denoTcpTransport({ listen: false, credential, closeGraceMs: 100 }),
  });
});
