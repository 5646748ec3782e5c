/**
 * What Node and Bun (and bundlers without a `deno` condition) get for
 * `lanemux/transport/webtransport-server`: the same factory as `deno-webtransport.ts`, which throws
 * `ERR_UNSUPPORTED_RUNTIME` with what to do instead.
 *
 * Why: Node 20 has no HTTP/3 server (`node:quic` is behind a compile-time flag, nodejs/node#57142),
 * `@fails-components/webtransport` downloads native binaries at install time, and Bun has no
 * WebTransport at all (oven-sh/bun#13656). A Node server reaches browsers over WebSocket
 * (`webSocketServerTransport` from `lanemux/transport/ws-server`); a WebTransport server runs on Deno.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import type { WebTransportServerAdapter, WebTransportServerTransportOptions } from './deno-webtransport.ts';

export type { WebTransportServerAdapter, WebTransportServerTransportOptions } from './deno-webtransport.ts';

/**
 * Always throws `ERR_UNSUPPORTED_RUNTIME` outside Deno: there is no WebTransport (HTTP/3) server in
 * Node 20 or Bun. Serve browsers over WebSocket (`lanemux/transport/ws-server`) or run the server on Deno.
 */
export function webTransportServerTransport(_options: WebTransportServerTransportOptions): WebTransportServerAdapter {
  const runtime =
    (globalThis as { Bun?: unknown }).Bun !== undefined
      ? 'Bun'
      : 'this runtime (Node has no WebTransport/HTTP3 server up to Node 20)';
  throw new LanemuxError(
    'ERR_UNSUPPORTED_RUNTIME',
    `webTransportServerTransport is not available on ${runtime}: serve browsers over WebSocket ` +
      "(webSocketServerTransport from 'lanemux/transport/ws-server'), or run the WebTransport server on Deno " +
      "(deno run --unstable-net; 'lanemux/transport/webtransport-server' resolves to the Deno adapter there)",
  );
}
