/**
 * What both ends of a `tcp-stream` connection agree on (the format is in `node-tcp-stream.ts` and
 * docs/protocol.md §9): the preface and prefix sizes, the consumer's stop frame, and the endpoint
 * syntax a consumer hands out and a producer dials.
 *
 * @packageDocumentation
 */

/** Bytes of the connection preface: `[u64 anchorId][u64 sessionId]`, big-endian. */
export const TCP_STREAM_PREFACE_BYTES = 16;

/** Bytes of each frame's length prefix (`u32`, big-endian). */
export const TCP_STREAM_PREFIX_BYTES = 4;

/** The consumer's stop request, consumer → producer: a 1-byte body, action 0 (docs/protocol.md §9). */
export const STOP_FRAME: Uint8Array = /*@__PURE__*/ Uint8Array.of(0, 0, 0, 1, 0);
/** Action byte of a 1-byte consumer → producer body: stop. Other values are reserved. */
export const ACTION_STOP = 0;

/** The largest anchor or session id the preface carries. */
export const U64_MAX = (1n << 64n) - 1n;

/** The endpoint a listener on `host:port` hands to producers (an IPv6 host in brackets). */
export function formatEndpoint(host: string, port: number): string {
  return `tcp-stream://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Parse `tcp-stream://host:port` strictly: the endpoint comes from a peer, so nothing else is dialled. */
export function parseEndpoint(endpoint: string): { host: string; port: number } | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return undefined;
  }
  const port = Number(url.port);
  if (
    url.protocol !== 'tcp-stream:' ||
    url.hostname === '' ||
    url.username !== '' ||
    url.password !== '' ||
    (url.pathname !== '' && url.pathname !== '/') ||
    url.search !== '' ||
    url.hash !== '' ||
    !Number.isInteger(port) ||
    port <= 0 ||
    port > 65535
  ) {
    return undefined;
  }
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
}
