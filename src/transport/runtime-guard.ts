/**
 * The check every runtime-specific adapter (Deno, Bun) runs when it is created: a clear
 * `ERR_UNSUPPORTED_RUNTIME` naming the adapter to use instead, rather than a `TypeError` about an
 * undefined `Deno` or `Bun` deep inside a dial.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';

/** Which adapter to use for each job in each runtime (for the error message). */
const INSTEAD: Readonly<Record<'tcp' | 'ws-server', string>> = {
  tcp:
    'use tcpTransport from lanemux/transport/node-tcp on Node, denoTcpTransport from lanemux/transport/deno-tcp on Deno, ' +
    'bunTcpTransport from lanemux/transport/bun-tcp on Bun (browsers cannot open TCP: dial a server with webSocketClientTransport)',
  'ws-server':
    'use webSocketServerTransport from lanemux/transport/ws-server on Node, denoWebSocketServerTransport from ' +
    'lanemux/transport/deno-ws on Deno, bunWebSocketServerTransport from lanemux/transport/bun-ws on Bun ' +
    '(browsers cannot accept connections: dial with webSocketClientTransport)',
};

/** The global of `runtime` if this runtime has it with every listed function, else undefined. */
export function runtimeGlobal<T>(runtime: 'Deno' | 'Bun', functions: readonly string[]): T | undefined {
  const g = (globalThis as Record<string, unknown>)[runtime];
  if (typeof g !== 'object' || g === null) return undefined;
  for (const f of functions) if (typeof (g as Record<string, unknown>)[f] !== 'function') return undefined;
  return g as T;
}

/**
 * `ERR_UNSUPPORTED_RUNTIME` for the adapter factory `factory` (in `lanemux/transport/<subpath>`),
 * which needs `needs`; says what to use instead for `job`.
 */
export function unsupportedRuntimeError(
  factory: string,
  subpath: string,
  needs: string,
  job: 'tcp' | 'ws-server',
): LanemuxError<'ERR_UNSUPPORTED_RUNTIME'> {
  return new LanemuxError(
    'ERR_UNSUPPORTED_RUNTIME',
    `${factory} (lanemux/transport/${subpath}) needs ${needs}, which this runtime does not have: ${INSTEAD[job]}`,
  );
}
