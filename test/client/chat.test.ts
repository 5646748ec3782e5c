// The AI SDK's transport on a page's client (`lanemux/client`): a streamText answer arrives whole, and
// a reloaded page (a new client, the same storage) re-attaches to the running answer.
import { convertToModelMessages, streamText } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { lanemuxChatTransport, serveChat } from '../../src/ai/index.ts';
import { MapStorage, assistantText, model, userMessage } from '../support/ai-model.ts';
import { closeAll, cuttableCarrier, page, wsServer } from './support.ts';

afterEach(closeAll);

const ask = (chatId: string, text: string) => ({
  chatId,
  trigger: 'submit-message' as const,
  messageId: undefined,
  messages: [userMessage(text)],
  abortSignal: undefined,
});

describe('lanemux/ai on lanemux/client', () => {
  it('useChat’s transport on a page client streams a streamText answer exactly', async () => {
    const { node, url } = await wsServer({ resume: { history: true } });
    const words = Array.from({ length: 200 }, (_, i) => `w${i} `);
    serveChat(node, async ({ messages }) =>
      streamText({ model: model(words), messages: await convertToModelMessages(messages) }),
    );
    const transport = lanemuxChatTransport({ client: await page(url) });
    expect(await assistantText(await transport.sendMessages(ask('c1', 'hi')))).toBe(words.join(''));
    expect(await transport.reconnectToStream({ chatId: 'c1' })).toBeNull();
  });

  it('a reloaded page (a new client, the same storage) re-attaches to the running answer and gets it whole', async () => {
    const { node, url } = await wsServer({ resume: { history: true } });
    const words = Array.from({ length: 60 }, (_, i) => `r${i} `);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    serveChat(node, async ({ messages }) =>
      streamText({ model: model(words, gate), messages: await convertToModelMessages(messages) }),
    );
    const storage = new MapStorage();
    const net = cuttableCarrier();
    const first = await page(url, { transport: net.factory, reconnectDelayMs: 60_000 });
    const s1 = await lanemuxChatTransport({ client: first, storage }).sendMessages(ask('c2', 'long one'));
    const reader = s1.getReader();
    expect((await reader.read()).done).toBe(false);
    expect([...storage.map.keys()]).toEqual(['lanemux-chat:c2']);
    // The page goes away mid-answer without a word, as a reload does.
    net.cut();
    void first.close();

    const t2 = lanemuxChatTransport({ client: await page(url), storage });
    const resumed = await t2.reconnectToStream({ chatId: 'c2' });
    expect(resumed).not.toBeNull();
    open();
    expect(await assistantText(resumed!)).toBe(words.join(''));
    expect(storage.map.size).toBe(0);
  });
});
