// A Node WebSocket server serving `generate`: each call streams its answer token by token.
import { createNode } from 'lanemux';
import { webSocketServerTransport } from 'lanemux/transport/ws-server';

const node = await createNode({ transports: [webSocketServerTransport({ port: Number(process.env.PORT ?? 8080) })] });

node.serve('generate', async ({ prompt }, sender, { signal }) => {
  for (let i = 1; i <= 40 && !signal.aborted; i++) await sender.send(i === 1 ? prompt : ` ${prompt.length * i}`);
});
console.log(`ready ${node.address}`);
