/**
 * The server half of `lanemux/ai`: `serveChat(node, handler)` serves the chat method; the handler
 * gets the AI SDK's request (chat id, trigger, messages) and returns what `streamText` returned (or
 * any `ReadableStream` of UI-message chunks), and each chunk goes to the caller as one item of the
 * call's stream — so lanemux's credit is the model's back-pressure: a slow page slows its own read
 * of the model's stream, no other.
 */
import type { UIMessage, UIMessageChunk } from 'ai';
import { CallError } from '../stream/call-envelope.ts';
import type { LanemuxNode } from '../stream/node.ts';
import type { CallContext, ServeOptions } from '../stream/serve.ts';
import { DEFAULT_CHAT_METHOD, RESUME_CHUNK_TYPE, type ChatCallRequest } from './chat-protocol.ts';

/** What a chat handler may return: a `streamText` result, or the UI-message chunks themselves. */
export type ChatAnswer = ReadableStream<UIMessageChunk> | { toUIMessageStream(): ReadableStream<UIMessageChunk> };

/** Options of {@link serveChat}: those of `node.serve`, and the method name. */
export interface ServeChatOptions extends ServeOptions {
  /** The method served. Defaults to `'chat'` (the transport's default). */
  readonly method?: string;
}

/** Serve a chat method for `lanemuxChatTransport`; returns the disposer (as `node.serve`). */
export function serveChat<M extends UIMessage = UIMessage>(
  node: Pick<LanemuxNode, 'serve'>,
  handler: (request: ChatCallRequest<M>, context: CallContext) => ChatAnswer | Promise<ChatAnswer>,
  options: ServeChatOptions = {},
): () => void {
  const { method = DEFAULT_CHAT_METHOD, ...serveOptions } = options;
  return node.serve<unknown, unknown>(
    method,
    async (request, sender, context) => {
      const req = checkRequest<M>(request, method);
      // First, the token a reloaded page re-attaches with (only when this node keeps history).
      const token = sender.resumeToken;
      if (token !== null) await sender.send({ type: RESUME_CHUNK_TYPE, data: { token }, transient: true });
      const answer = await handler(req, context);
      const stream = answer instanceof ReadableStream ? answer : answer.toUIMessageStream();
      const reader = stream.getReader();
      const stop = (): void => void reader.cancel(context.signal.reason).catch(() => {});
      context.signal.addEventListener('abort', stop, { once: true });
      try {
        for (;;) {
          const r = await reader.read();
          if (r.done) return;
          // Waits for credit: the caller's reading paces the model's stream.
          await sender.send(r.value);
        }
      } finally {
        context.signal.removeEventListener('abort', stop);
        reader.releaseLock();
      }
    },
    serveOptions,
  );
}

function checkRequest<M extends UIMessage>(request: unknown, method: string): ChatCallRequest<M> {
  const r = request as Partial<ChatCallRequest<M>> | null;
  if (
    typeof r !== 'object' ||
    r === null ||
    typeof r.chatId !== 'string' ||
    (r.trigger !== 'submit-message' && r.trigger !== 'regenerate-message') ||
    !Array.isArray(r.messages)
  )
    throw new CallError(
      'ERR_INVALID_REQUEST',
      method,
      'a chat request has chatId (string), trigger and messages (array)',
    );
  return r as ChatCallRequest<M>;
}
