// The AI SDK pieces the lanemux/ai tests share: a mock model streaming words, the assistant text
// `useChat` would build from a chunk stream, and a Map-backed `Storage`.
import { readUIMessageStream, type UIMessage } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import type { TokenStorage } from '../../src/ai/index.ts';

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

/**
 * A model that streams `words` as text deltas, `gate` (if given) holding back the second half;
 * `aborted` is called when the call's abort signal fires.
 */
export function model(words: string[], gate?: Promise<void>, aborted?: () => void): MockLanguageModelV4 {
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

export const userMessage = (text: string): UIMessage => ({ id: 'u1', role: 'user', parts: [{ type: 'text', text }] });

/** The assistant text the AI SDK builds from a chunk stream, as `useChat` does. */
export async function assistantText(stream: ReadableStream<unknown>): Promise<string> {
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream: stream as never })) last = m;
  return (last?.parts ?? [])
    .filter((p): p is { type: 'text'; text: string } => p.type === 'text')
    .map((p) => p.text)
    .join('');
}

export class MapStorage implements TokenStorage {
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
