// A Bun WebSocket server serving `generate`: each call streams the words of its answer.
import { createNode } from 'lanemux';
import { bunWebSocketServerTransport } from 'lanemux/transport/bun-ws';

const port = Number(process.env['PORT'] ?? 8080);
const node = await createNode({ transports: [bunWebSocketServerTransport({ port })] });

node.serve('generate', async ({ prompt }: { prompt: string }, sender, { signal }) => {
  for (const word of `Bun says: ${prompt}`.split(' ')) {
    if (signal.aborted) return; // the client cancelled or went away
    await sender.send(`${word} `); // waits only when the client's credit runs out
  }
});

console.log(`ready ${node.address}`);
