/**
 * The AI SDK over lanemux, with the `ai` package itself: the server serves `streamText` results
 * through `serveChat`, the client's `lanemuxChatTransport` hands the AI SDK a chunk stream that
 * `readUIMessageStream` (what `useChat` runs) turns into the assistant message. A reloaded page
 * (a new node, the same storage) reconnects to a running answer and gets it whole; an abort reaches
 * the model's stream.
 */
import { convertToModelMessages, streamText } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { lanemuxChatTransport, serveChat } from '../../src/ai/index.ts';
import { createNode, type LanemuxNode } from '../../src/index.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { MapStorage, assistantText, model, userMessage } from '../support/ai-model.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

async function pair(): Promise<{
  server: LanemuxNode;
  page: () => Promise<{ node: LanemuxNode; peer: string; cut: () => void }>;
}> {
  const network = createMemoryNetwork();
  const server = await createNode({
    transports: [memoryTransport({ network, name: 'server' })],
    resume: { history: true },
  });
  nodes.push(server);
  return {
    server,
    page: async () => {
      const { adapter, cut } = cuttable(network, 'page reloaded');
      const node = await createNode({ transports: [adapter] });
      nodes.push(node);
      return { node, peer: await node.connect(server.address), cut };
    },
  };
}

describe('lanemux/ai with the AI SDK', () => {
  it("useChat's transport streams a streamText answer: the AI SDK builds the exact assistant text", async () => {
    const { server, page } = await pair();
    const words = Array.from({ length: 200 }, (_, i) => `w${i} `);
    let seen: string | undefined;
    serveChat(server, async ({ messages }) => {
      seen = (messages[0]!.parts[0] as { text: string }).text;
      return streamText({ model: model(words), messages: await convertToModelMessages(messages) });
    });
    const { node, peer } = await page();
    const transport = lanemuxChatTransport({ node, peer });
    const stream = await transport.sendMessages({
      chatId: 'c1',
      trigger: 'submit-message',
      messageId: undefined,
      messages: [userMessage('hello')],
      abortSignal: undefined,
    });
    expect(await assistantText(stream)).toBe(words.join(''));
    expect(seen).toBe('hello');
    // The answer completed: nothing left to reconnect to.
    expect(await transport.reconnectToStream({ chatId: 'c1' })).toBeNull();
  });

  it('a reloaded page (new node, same storage) reconnects to the running answer and gets it whole, once', async () => {
    const { server, page } = await pair();
    const words = Array.from({ length: 60 }, (_, i) => `r${i} `);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    serveChat(server, async ({ messages }) =>
      streamText({ model: model(words, gate), messages: await convertToModelMessages(messages) }),
    );
    const storage = new MapStorage();
    const first = await page();
    const t1 = lanemuxChatTransport({ node: first.node, peer: first.peer, storage });
    const s1 = await t1.sendMessages({
      chatId: 'c2',
      trigger: 'submit-message',
      messageId: undefined,
      messages: [userMessage('long one')],
      abortSignal: undefined,
    });
    // Read a first chunk (the token is stored by then), then the page goes away mid-answer: its
    // socket drops without a word (as a reload does), and the page never comes back.
    const reader = s1.getReader();
    expect((await reader.read()).done).toBe(false);
    expect([...storage.map.keys()]).toEqual(['lanemux-chat:c2']);
    first.cut();
    void first.node.close();

    const second = await page();
    const t2 = lanemuxChatTransport({ node: second.node, peer: second.peer, storage });
    expect(t2.resumeStreamIsReplay).toBe(true);
    const resumed = await t2.reconnectToStream({ chatId: 'c2' });
    expect(resumed).not.toBeNull();
    open();
    expect(await assistantText(resumed!)).toBe(words.join(''));
    expect(storage.map.size).toBe(0);
  });

  it("aborting the request aborts the model call on the server (the handler's signal given to streamText)", async () => {
    const { server, page } = await pair();
    let aborted!: () => void;
    const wasAborted = new Promise<void>((r) => (aborted = r));
    const never = new Promise<void>(() => {});
    serveChat(server, async ({ messages }, { signal }) =>
      streamText({
        model: model(['a', 'b', 'c', 'd'], never, aborted),
        messages: await convertToModelMessages(messages),
        abortSignal: signal,
      }),
    );
    const { node, peer } = await page();
    const abort = new AbortController();
    const stream = await lanemuxChatTransport({ node, peer }).sendMessages({
      chatId: 'c3',
      trigger: 'submit-message',
      messageId: undefined,
      messages: [userMessage('stop me')],
      abortSignal: abort.signal,
    });
    const reader = stream.getReader();
    expect((await reader.read()).done).toBe(false);
    abort.abort();
    await expect(reader.read()).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await wasAborted;
  });

  it('a request that is not a chat request is refused with ERR_INVALID_REQUEST', async () => {
    const { server, page } = await pair();
    serveChat(server, () => new ReadableStream());
    const { node, peer } = await page();
    const call = node.stream(peer, 'chat', { hello: 1 });
    await expect(call.next()).rejects.toMatchObject({ code: 'ERR_INVALID_REQUEST' });
  });
});
