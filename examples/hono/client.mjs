// A Node client: calls `generate` three times at once over one connection and prints each answer.
import { createNode } from 'lanemux';
import { webSocketClientTransport } from 'lanemux/transport/websocket';
import WebSocket from 'ws'; // Node 20 has no global WebSocket

const node = await createNode({ transports: [webSocketClientTransport({ WebSocket })] });
const peer = await node.connect(process.argv[2] ?? 'ws://127.0.0.1:8080/lanemux');

const ask = async (prompt) => {
  let text = '';
  for await (const token of node.stream(peer, 'generate', { prompt })) text += token;
  return text.trim();
};
for (const answer of await Promise.all(['one', 'two', 'three'].map(ask))) console.log(answer);
await node.close();
