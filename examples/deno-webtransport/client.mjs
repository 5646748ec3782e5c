// A Node client over the server's WebSocket endpoint (Node has no WebTransport client).
import { createNode } from 'lanemux';
import { webSocketClientTransport } from 'lanemux/transport/websocket';
import WebSocket from 'ws';

const node = await createNode({ transports: [webSocketClientTransport({ WebSocket })] });
const peer = await node.connect(process.argv[2] ?? 'ws://127.0.0.1:8080/lanemux');

let text = '';
for await (const token of node.stream(peer, 'generate', { prompt: process.argv[3] ?? 'hello' })) text += token;
console.log(text.trim());
await node.close();
