/**
 * What `lanemuxChatTransport` and `serveChat` agree on: the call's request (the AI SDK's
 * `sendMessages` options that travel) and the one chunk lanemux adds to the answer — a transient
 * data chunk carrying the resume token, first, which the transport takes out before the AI SDK sees it.
 */
import type { UIMessage } from 'ai';

/** The method `serveChat` serves and the transport calls unless told otherwise. */
export const DEFAULT_CHAT_METHOD = 'chat';

/** The type of the resume-token chunk (a transient AI SDK data chunk: never part of a message). */
export const RESUME_CHUNK_TYPE = 'data-lanemux-resume';

/** The request of a chat call. */
export interface ChatCallRequest<M extends UIMessage = UIMessage> {
  readonly chatId: string;
  readonly trigger: 'submit-message' | 'regenerate-message';
  readonly messageId: string | null;
  readonly messages: M[];
  /** `sendMessage(…, { body })` / the transport's `body`: extra JSON for the server. */
  readonly body?: object;
  readonly metadata?: unknown;
}
