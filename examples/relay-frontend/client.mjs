// A client of the frontend: four streams at once, each checked for order and completeness.
import { createNode } from 'lanemux';
import { webSocketClientTransport } from 'lanemux/transport/websocket';
import WebSocket from 'ws';

const node = await createNode({ transports: [webSocketClientTransport({ WebSocket })] });
const frontend = await node.connect(process.argv[2] ?? 'ws://127.0.0.1:8080/lanemux');

const read = async (prompt, count) => {
  const tokens = [];
  for await (const token of node.stream(frontend, 'generate', { prompt, count })) tokens.push(token);
  const exact = tokens.every((t, i) => t === `${prompt}-${i}`) && tokens.length === count;
  return `${prompt}: ${tokens.length} tokens${exact ? ', in order' : ', WRONG'}`;
};
for (const line of await Promise.all(['a', 'b', 'c', 'd'].map((p) => read(p, 1000)))) console.log(line);
await node.close();
