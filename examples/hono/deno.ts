// Deno: lanemux's Deno WebSocket server owns the port and hands every other request to the Hono app.
import { createNode } from 'lanemux';
import { denoWebSocketServerTransport } from 'lanemux/transport/deno-ws';
import { app, serveGenerate } from './app.mjs';

const port = Number(Deno.env.get('PORT') ?? 8080);
const node = await createNode({ transports: [denoWebSocketServerTransport({ port, fetch: app.fetch })] });
serveGenerate(node);
console.log(`ready ${node.address}`);
