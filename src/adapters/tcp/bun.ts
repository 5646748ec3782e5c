/**
 * `lanemux/transport/tcp` under Bun (the `bun` export condition): the Bun TCP adapter under the
 * name every runtime's `tcp` entry exports, so one import serves Node, Deno and Bun.
 *
 * @packageDocumentation
 */
export { bunTcpTransport as tcpTransport } from '../bun-tcp.ts';
export type {
  BunTcpTransportOptions as TcpTransportOptions,
  BunTcpTlsOptions as TcpTlsOptions,
  PemInput,
} from '../bun-tcp.ts';
