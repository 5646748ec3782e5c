/**
 * The error a server-side adapter raises where it cannot run. The package's `exports` map sends the
 * `browser` and `default` conditions (a browser, workerd) of `lanemux/transport/tcp`, `…/node-tcp`,
 * `…/tcp-stream` and `…/ws-server` to the stubs in this folder, so a browser bundle that imports one fails as soon as
 * the module is evaluated, with a message naming the adapter to use instead, rather than with a
 * bundler error about `node:net` or a `ws` module that cannot work in a browser.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../../errors.ts';

/** What to use in a browser or worker instead of a Node-only adapter. */
const INSTEAD =
  'in a browser or worker, dial a server with webSocketClientTransport from lanemux/transport/websocket ' +
  '(or the WebTransport client in lanemux/transport/webtransport), and run the server on Node, Deno or Bun';

/**
 * `ERR_UNSUPPORTED_RUNTIME` for `adapter` (its subpath under `lanemux/transport/`), naming what it
 * needs and what to use instead.
 */
export function unsupportedRuntime(adapter: string, needs: string): LanemuxError<'ERR_UNSUPPORTED_RUNTIME'> {
  return new LanemuxError(
    'ERR_UNSUPPORTED_RUNTIME',
    `lanemux/transport/${adapter} needs ${needs}, which this runtime does not have: ${INSTEAD}`,
  );
}
