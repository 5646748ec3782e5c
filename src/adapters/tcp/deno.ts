/**
 * `lanemux/transport/tcp` under Deno (the `deno` export condition): the Deno TCP adapter under the
 * name every runtime's `tcp` entry exports, so one import serves Node, Deno and Bun.
 *
 * @packageDocumentation
 */
export { denoTcpTransport as tcpTransport } from '../deno-tcp.ts';
export type {
  DenoTcpTransportOptions as TcpTransportOptions,
  DenoTcpTlsOptions as TcpTlsOptions,
  PemInput,
} from '../deno-tcp.ts';
