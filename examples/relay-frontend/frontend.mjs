// The frontend: clients call it over WebSocket, it forwards each call to the engine and relays the stream.
import { createNode } from 'lanemux';
import { tcpTransport } from 'lanemux/transport/tcp';
import { webSocketServerTransport } from 'lanemux/transport/ws-server';

const frontend = await createNode({
  transports: [webSocketServerTransport({ port: Number(process.env.PORT ?? 8080) }), tcpTransport({ listen: false })],
});
const engine = await frontend.connect(process.argv[2] ?? 'tcp://127.0.0.1:7070');

frontend.serve('generate', async (request, sender, { signal }) => {
  // Reading the engine's stream only as fast as the client takes it keeps credit end to end:
  // a slow client holds back its own stream at the engine, and the frontend buffers one credit window.
  for await (const token of frontend.stream(engine, 'generate', request, { signal })) await sender.send(token);
});
console.log(`ready ${frontend.address}`);
