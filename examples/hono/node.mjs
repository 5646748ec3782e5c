// Node: Hono on @hono/node-server; lanemux's WebSocket server attaches to the same HTTP server.
import { serve } from '@hono/node-server';
import { createNode } from 'lanemux';
import { webSocketServerTransport } from 'lanemux/transport/ws-server';
import { app, serveGenerate } from './app.mjs';

const port = Number(process.env.PORT ?? 8080);
const server = await new Promise((resolve) => {
  const s = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => resolve(s));
});
const node = await createNode({ transports: [webSocketServerTransport({ server })] });
serveGenerate(node);
console.log(`ready ${node.address}`);
