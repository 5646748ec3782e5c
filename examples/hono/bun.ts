// Bun: lanemux's Bun WebSocket server owns the port and hands every other request to the Hono app.
import { createNode } from 'lanemux';
import { bunWebSocketServerTransport } from 'lanemux/transport/bun-ws';
import { app, serveGenerate } from './app.mjs';

const port = Number(process.env['PORT'] ?? 8080);
const node = await createNode({ transports: [bunWebSocketServerTransport({ port, fetch: app.fetch })] });
serveGenerate(node);
console.log(`ready ${node.address}`);
