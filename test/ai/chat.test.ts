/**
 * The AI SDK over lanemux, with the `ai` package itself: the server serves `streamText` results
 * through `serveChat`, the client's `lanemuxChatTransport` hands the AI SDK a chunk stream that
 * `readUIMessageStream` (what `useChat` runs) turns into the assistant message. A reloaded page
 * (a new node, the same storage) reconnects to a running answer and gets it whole; an abort reaches
 * the model's stream.
 */
import { convertToModelMessages, readUIMessageStream, streamText, type UIMessage } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { lanemuxChatTransport, serveChat, type TokenStorage } from '../../src/ai/index.ts';
import { createNode, type LanemuxNode } from '../../src/index.ts';
import { cuttable } from '../support/cuttable-memory.ts';

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

/**
 * A model that streams `words` as text deltas, `gate` (if given) holding back the second half;
 * `aborted` is called when the call's abort signal fires.
 */
function model(words: string[], gate?: Promise<void>, aborted?: () => void): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    doStream: async (options) => {
      options.abortSignal?.addEventListener('abort', () => aborted?.(), { once: true });
      const parts = [
        { type: 'stream-start' as const, warnings: [] },
        { type: 'text-start' as const, id: 't' },
        ...words.map((delta) => ({ type: 'text-delta' as const, id: 't', delta })),
        { type: 'text-end' as const, id: 't' },
        {
          type: 'finish' as const,
          finishReason: { unified: 'stop' as const, raw: 'stop' },
          usage: { ...usage, outputTokens: { total: words.length, text: words.length, reasoning: 0 } },
        },
      ];
      let i = 0;
      const half = Math.floor(parts.length / 2);
      return {
        stream: new ReadableStream({
          async pull(c) {
            if (i === half && gate !== undefined) await gate;
            if (i < parts.length) c.enqueue(parts[i++]!);
            else c.close();
          },
        }),
      };
    },
  });
}

const userMessage = (text: string): UIMessage => ({ id: 'u1', role: 'user', parts: [{ type: 'text', text }] });

/** The assistant text the AI SDK builds from a chunk stream, as `useChat` does. */
async function assistantText(stream: ReadableStream<unknown>): Promise<string> {
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream: stream as never })) last = m;
  return (last?.parts ?? [])
    .filter((p): p is { type: 'text'; text: string } => p.type === 'text')
    .map((p) => p.text)
    .join('');
}

class MapStorage implements TokenStorage {
  readonly map = new Map<string, string>();
  getItem(k: string): string | null {
    return this.map.get(k) ?? null;
  }
  setItem(k: string, v: string): void {
    this.map.set(k, v);
  }
  removeItem(k: string): void {
    this.map.delete(k);
  }
}

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
