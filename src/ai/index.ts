/**
 * `lanemux/ai`: the AI SDK over lanemux. In the page, `useChat({ transport: lanemuxChatTransport({ node, peer }) })`;
 * on the server, `serveChat(node, ({ messages }) => streamText({ model, messages: … }))`. `ai` is an
 * optional peer dependency; this entry imports only its types.
 *
 * @packageDocumentation
 */
export { lanemuxChatTransport } from './chat-transport.ts';
export type { LanemuxChatTransportOptions, TokenStorage } from './chat-transport.ts';
export { serveChat } from './serve-chat.ts';
export type { ChatAnswer, ServeChatOptions } from './serve-chat.ts';
export { DEFAULT_CHAT_METHOD, RESUME_CHUNK_TYPE } from './chat-protocol.ts';
export type { ChatCallRequest } from './chat-protocol.ts';
