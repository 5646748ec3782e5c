// The AI SDK on the server: `serveChat` answers each chat request with a `streamText` result.
// The model is the AI SDK's mock, which streams "You said: <the last message>" word by word.
import { convertToModelMessages, streamText } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { createNode } from 'lanemux';
import { serveChat } from 'lanemux/ai';
import { webSocketServerTransport } from 'lanemux/transport/ws-server';

const finish = { unified: 'stop', raw: 'stop' };
const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
const echoModel = (text) =>
  new MockLanguageModelV4({
    doStream: async () => ({
      stream: ReadableStream.from([
        { type: 'text-start', id: 't' },
        ...text.split(/(?<= )/).map((delta) => ({ type: 'text-delta', id: 't', delta })),
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: finish, usage },
      ]),
    }),
  });

const textOf = (message) => message.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');

const node = await createNode({ transports: [webSocketServerTransport({ port: Number(process.env.PORT ?? 8080) })] });
serveChat(node, async ({ messages }, { signal }) => {
  const model = echoModel(`You said: ${textOf(messages.at(-1))}`);
  return streamText({ model, messages: await convertToModelMessages(messages), abortSignal: signal });
});
console.log(`ready ${node.address}`);
