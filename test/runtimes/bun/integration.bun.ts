// The mux integration suites under `bun test`, over the Bun adapters: TCP (Bun.listen /
// Bun.connect), the Bun.serve WebSocket server and the WHATWG client on Bun's global WebSocket.
// The suites are the vitest files themselves (Bun maps `vitest` to bun:test).
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../../src/adapters/bun-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { useSuiteTransports } from '../../integration/helpers.ts';
import '../../integration/mux-tcp.test.ts';
import '../../integration/streams-tcp.test.ts';
import '../../integration/lanes-ws.test.ts';

// Tests run after every module has loaded, so this applies to all of them.
useSuiteTransports({
  tcp: ({ listen }) => bunTcpTransport(listen ? { port: 0 } : { listen: false }),
  wsServer: () => bunWebSocketServerTransport({ port: 0 }),
  wsClient: () => webSocketClientTransport(),
});
