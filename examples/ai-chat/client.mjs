// A Node client of the chat: the transport `useChat` would use, read with the AI SDK's own parser.
import { readUIMessageStream } from 'ai';
import { createNode } from 'lanemux';
import { lanemuxChatTransport } from 'lanemux/ai';
import { webSocketClientTransport } from 'lanemux/transport/websocket';
import WebSocket from 'ws';

const node = await createNode({ transports: [webSocketClientTransport({ WebSocket })] });
const peer = await node.connect(process.argv[2] ?? 'ws://127.0.0.1:8080/lanemux');
const transport = lanemuxChatTransport({ node, peer });

const text = process.argv[3] ?? 'hello from lanemux';
const stream = await transport.sendMessages({
  chatId: 'chat-1',
  trigger: 'submit-message',
  messageId: undefined,
  messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text }] }],
  abortSignal: undefined,
});
let answer;
for await (const message of readUIMessageStream({ stream })) answer = message; // grows as chunks arrive
console.log(
  answer.parts
    .filter((p) => p.type === 'text')
    .map((p) => p.text)
    .join(''),
);
await node.close();
