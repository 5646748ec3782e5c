// A Bun peer for the cross-runtime tests: listens on Bun TCP and the Bun.serve WebSocket server,
// prints one ready line (JSON with its addresses), serves peer-protocol.ts, exits when stdin closes.
// Run: bun run test/runtimes/bun/peer.ts
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../../src/adapters/bun-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { runtimeName, startPeer } from '../peer-protocol.ts';

declare const Bun: { stdin: { stream(): AsyncIterable<Uint8Array> } };

const dialers = () => [bunTcpTransport({ listen: false }), webSocketClientTransport()];
const peer = await startPeer(
  [bunTcpTransport({ port: 0 }), bunWebSocketServerTransport({ port: 0 }), webSocketClientTransport()],
  dialers,
);
const [tcp, ws] = peer.node.addresses;
console.log(JSON.stringify({ ready: true, runtime: runtimeName(), tcp, ws }));
for await (const _ of Bun.stdin.stream()) {
  // Nothing is sent on stdin; its end means the parent is done.
}
await peer.close();
process.exit(0);
