/**
 * Options and addresses shared by the TCP adapters of Node, Deno and Bun (`node-tcp.ts`, `deno-tcp.ts`,
 * `bun-tcp.ts`) and the WebSocket server adapters of Deno and Bun, so they accept exactly what the Node
 * adapters accept (`node-tcp.ts`, `ws-server.ts`) and print the same addresses (`tcp://host:port`,
 * `ws://host:port/path`).
 *
 * @packageDocumentation
 */
import { z } from 'zod/mini';
import { TransportError } from './errors.ts';
import { admissionSchema } from './options.ts';
import { int } from '../validate.ts';

/** Options of the TCP adapters of Node (`tcpTransport`), Deno and Bun. */
export interface SocketTcpTransportOptions {
  /** Listen on this host. Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Listen on this port; 0 picks a free one. Defaults to 0. */
  readonly port?: number;
  /** Whether to listen at all (a pure client sets false). Defaults to true. */
  readonly listen?: boolean;
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** Time allowed for one lane's TCP connect. Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /** After a graceful close, close the socket if the peer has not closed within this. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
}

export const tcpOptionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  listen: z._default(z.boolean(), true),
  ...admissionSchema,
  connectTimeoutMs: z._default(int(1, 600_000), 10_000),
  closeGraceMs: z._default(int(0, 600_000), 2_000),
});

export type TcpOptions = z.output<typeof tcpOptionsSchema>;

/** Options of the Deno and Bun WebSocket server adapters (listen only). */
export interface SocketWebSocketServerOptions {
  /** Listen on this host. Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Listen on this port, 0 for a free one. Defaults to 0. */
  readonly port?: number;
  /** URL path of the endpoint; other paths get 404. Defaults to `/lanemux`. */
  readonly path?: string;
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** After a graceful close, drop the socket if the close handshake has not finished. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
  /** While an admission waits and the runtime has no drain event, re-check the buffer this often. Defaults to 5 ms. */
  readonly drainPollMs?: number;
}

export const wsServerOptionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  path: z._default(z.string().check(z.startsWith('/')), '/lanemux'),
  ...admissionSchema,
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  drainPollMs: z._default(int(1, 1_000), 5),
});

export type WsServerOptions = z.output<typeof wsServerOptionsSchema>;

/** `tcp://host:port`, brackets around an IPv6 host. */
export function formatTcpAddress(host: string, port: number): string {
  return `tcp://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** `ws://host:port/path`, brackets around an IPv6 host. */
export function formatWsAddress(host: string, port: number, path: string): string {
  return `ws://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;
}

/** `tcp://host:port` → parts, or undefined if it is not one. */
export function parseTcpAddress(address: string): { host: string; port: number } | undefined {
  try {
    const url = new URL(address);
    const port = Number(url.port);
    if (url.protocol !== 'tcp:' || !Number.isInteger(port) || port <= 0) return undefined;
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
  } catch {
    return undefined;
  }
}

/** Why a TCP dial cannot start: the adapter is closed, or `address` is not `tcp://host:port`. */
export function tcpDialRefusal(address: string, closed: boolean, adapter: string): TransportError {
  return closed ? new TransportError('ERR_CLOSED', `${adapter} is closed`) : new TransportError('ERR_UNSUPPORTED_ADDRESS', `not a tcp://host:port address: ${address}`);
}
