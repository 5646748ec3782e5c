// A Deno peer for the cross-runtime tests: listens on Deno TCP and the Deno.serve WebSocket server,
// prints one ready line (JSON with its addresses), serves peer-protocol.ts, exits when stdin closes.
// Run: deno run --no-check --allow-net --allow-read --allow-env test/runtimes/deno/peer.ts
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../../src/adapters/deno-ws.ts';
import { webSocketClientTransport } from '../../../src/adapters/websocket.ts';
import { runtimeName, startPeer } from '../peer-protocol.ts';

declare const Deno: { stdin: { readable: AsyncIterable<Uint8Array> }; exit(code: number): never };

const dialers = () => [denoTcpTransport({ listen: false }), webSocketClientTransport()];
const peer = await startPeer(
  [denoTcpTransport({ port: 0 }), denoWebSocketServerTransport({ port: 0 }), webSocketClientTransport()],
  dialers,
);
const [tcp, ws] = peer.node.addresses;
console.log(JSON.stringify({ ready: true, runtime: runtimeName(), tcp, ws }));
for await (const _ of Deno.stdin.readable) {
  // Nothing is sent on stdin; its end means the parent is done.
}
await peer.close();
Deno.exit(0);
