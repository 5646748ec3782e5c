/**
 * The AI SDK's `ChatTransport` over lanemux (`lanemux/ai`): `useChat({ transport })` sends its
 * messages as one lanemux call (`node.stream`, one round trip) and reads the answer's UI-message
 * chunks from the call's stream, with lanemux's credit back-pressure and, between two nodes with
 * resume on, transparent resume across a lost link. After a page reload, `reconnectToStream`
 * re-attaches to the answer from the resume token the server sent first (kept in `storage`) and
 * replays it from its start — the reloaded page has lost its partial message — then goes on live.
 */
import type { ChatTransport, UIMessage, UIMessageChunk } from 'ai';
import type { Client } from '../client/client.ts';
import type { PeerId } from '../messenger/types.ts';
import type { LanemuxNode } from '../stream/node.ts';
import { DEFAULT_CHAT_METHOD, RESUME_CHUNK_TYPE, type ChatCallRequest } from './chat-protocol.ts';

/** Where resume tokens are kept across a reload: `sessionStorage` fits (the `Storage` interface). */
export interface TokenStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/**
 * Options of {@link lanemuxChatTransport}: a page's `client` (`connect` from `lanemux/client`), or a
 * `node` with the server's `peer`.
 */
export type LanemuxChatTransportOptions = ChatTransportCommon &
  (
    | {
        /** The page's client (`connect(url)` from `lanemux/client`): its one server answers. */
        readonly client: Pick<Client, 'stream' | 'reattach' | 'server'>;
        readonly node?: undefined;
        readonly peer?: undefined;
      }
    | {
        /** A node (`createNode` or `createClient` from `lanemux`). */
        readonly node: Pick<LanemuxNode, 'stream' | 'reattach'>;
        /** The server's peer id (what `node.connect` resolved), or a function giving it before each request. */
        readonly peer: PeerId | (() => PeerId | Promise<PeerId>);
        readonly client?: undefined;
      }
  );

/** The options every {@link lanemuxChatTransport} takes. */
export interface ChatTransportCommon {
  /** The method the server serves with `serveChat`. Defaults to `'chat'`. */
  readonly method?: string;
  /**
   * Where the resume token of each chat's running answer is kept, so a reloaded page can reconnect.
   * Defaults to memory (reconnects within the page only); pass `sessionStorage` in a browser.
   */
  readonly storage?: TokenStorage;
  /** Key prefix in `storage`. Defaults to `'lanemux-chat:'`. */
  readonly storageKeyPrefix?: string;
  /** How long the server may take to accept a call, ms. Defaults to 10,000 (`node.stream`'s). */
  readonly timeoutMs?: number;
}

class MemoryStorage implements TokenStorage {
  readonly #m = new Map<string, string>();
  getItem(key: string): string | null {
    return this.#m.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.#m.set(key, value);
  }
  removeItem(key: string): void {
    this.#m.delete(key);
  }
}

/** A stored token: the answer's resume token and the server it came from. */
interface Saved {
  readonly token: string;
  readonly peer: string;
}

/** The AI SDK transport (see the module comment). */
export function lanemuxChatTransport<M extends UIMessage = UIMessage>(
  options: LanemuxChatTransportOptions,
): ChatTransport<M> {
  const method = options.method ?? DEFAULT_CHAT_METHOD;
  const storage = options.storage ?? new MemoryStorage();
  const prefix = options.storageKeyPrefix ?? 'lanemux-chat:';
  const client = options.client;
  const node: Pick<LanemuxNode, 'stream' | 'reattach'> =
    client === undefined
      ? options.node
      : {
          stream: ((_peer: PeerId, m: string, r: unknown, o?: { signal?: AbortSignal }) =>
            client.stream(m, r, o)) as unknown as LanemuxNode['stream'],
          reattach: ((_peer: PeerId, token: string, o: { offset: number }) =>
            client.reattach(token, o)) as unknown as LanemuxNode['reattach'],
        };
  const peerOf = async (): Promise<PeerId> =>
    client !== undefined ? client.server : typeof options.peer === 'function' ? options.peer() : options.peer;

  /** The chunks of one answer, the resume chunk taken out (and saved for `chatId`). */
  const chunks = (source: AsyncIterable<unknown>, chatId: string, peer: PeerId) => {
    const key = prefix + chatId;
    const it = source[Symbol.asyncIterator]();
    return new ReadableStream<UIMessageChunk>({
      async pull(controller) {
        for (;;) {
          let r: IteratorResult<unknown>;
          try {
            r = await it.next();
          } catch (e) {
            controller.error(e);
            return;
          }
          if (r.done) {
            // The answer is complete: nothing to reconnect to any more.
            storage.removeItem(key);
            controller.close();
            return;
          }
          const chunk = r.value as UIMessageChunk & { data?: { token?: unknown } };
          if (chunk.type === RESUME_CHUNK_TYPE) {
            const token = chunk.data?.token;
            if (typeof token === 'string') storage.setItem(key, JSON.stringify({ token, peer } satisfies Saved));
            continue;
          }
          controller.enqueue(chunk);
          return;
        }
      },
      async cancel() {
        storage.removeItem(key);
        await it.return?.();
      },
    });
  };

  return {
    // A reconnect re-attaches from the answer's first item: the complete response again.
    resumeStreamIsReplay: true,
    async sendMessages({ chatId, messages, trigger, messageId, abortSignal, body, metadata }) {
      const peer = await peerOf();
      const request: ChatCallRequest = {
        chatId,
        trigger,
        messageId: messageId ?? null,
        messages,
        ...(body !== undefined ? { body } : {}),
        ...(metadata !== undefined ? { metadata } : {}),
      };
      const call = node.stream<unknown>(peer, method, request, {
        ...(abortSignal !== undefined ? { signal: abortSignal } : {}),
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      });
      return chunks(call, chatId, peer);
    },
    async reconnectToStream({ chatId }) {
      const raw = storage.getItem(prefix + chatId);
      if (raw === null) return null;
      let saved: Saved;
      try {
        saved = JSON.parse(raw) as Saved;
        if (typeof saved.token !== 'string' || typeof saved.peer !== 'string') throw new Error('bad entry');
      } catch {
        storage.removeItem(prefix + chatId);
        return null;
      }
      try {
        const anchor = await node.reattach<unknown>(saved.peer, saved.token, { offset: 0 });
        return chunks(anchor, chatId, saved.peer);
      } catch {
        // The answer is gone (finished long ago, evicted, or its server restarted): nothing to resume.
        storage.removeItem(prefix + chatId);
        return null;
      }
    },
  };
}
