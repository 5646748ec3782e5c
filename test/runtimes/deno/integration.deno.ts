// The mux integration suites under `deno test`, over the Deno adapters: TCP (Deno.listen /
// Deno.connect), the Deno.serve WebSocket server and the WHATWG client on Deno's global WebSocket.
// The suites are the vitest files themselves (vitest → the portable shim via deno.json).
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../../src/adapters/deno-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { useSuiteTransports } from '../../integration/helpers.ts';
import '../../integration/mux-tcp.test.ts';
import '../../integration/streams-tcp.test.ts';
import '../../integration/lanes-ws.test.ts';

// Tests run after every module has loaded, so this applies to all of them.
useSuiteTransports({
  tcp: ({ listen }) => denoTcpTransport(listen ? { port: 0 } : { listen: false }),
  wsServer: () => denoWebSocketServerTransport({ port: 0 }),
  wsClient: () => webSocketClientTransport(),
});
