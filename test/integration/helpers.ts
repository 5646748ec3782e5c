// Shared setup for the TCP integration suites: nodes that are always closed, and the invariants
// every test must leave behind (reader_stall_total = 0, credit_lost_total = 0, live_slots = 0).
import net from 'node:net';
import { expect } from 'vitest';
import WebSocket from 'ws';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import type { TransportAdapter } from '../../src/transport/port.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';

export const open: LanemuxNode[] = [];

/** Where the suites get their transports; a runtime entry file (`test/runtimes/`) swaps in its own. */
export interface SuiteTransports {
  /** A loopback TCP adapter: listening on a free port, or dialling only. */
  tcp(options: { listen: boolean }): TransportAdapter;
  /** A WebSocket server adapter on a free loopback port. */
  wsServer(): TransportAdapter;
  /** A WebSocket client adapter. */
  wsClient(): TransportAdapter;
}

/** Node's adapters (Node 20 has no global WebSocket: `ws` is injected). */
export const suiteTransports: SuiteTransports = {
  tcp: ({ listen }) => tcpTransport(listen ? { port: 0 } : { listen: false }),
  wsServer: () => webSocketServerTransport({ port: 0 }),
  wsClient: () => webSocketClientTransport({ WebSocket: WebSocket as never }),
};

/** Run the suites over other adapters (Deno, Bun). */
export function useSuiteTransports(replacement: Partial<SuiteTransports>): void {
  Object.assign(suiteTransports, replacement);
}

/** A node listening on loopback TCP (or dialling only, with `listen: false`). */
export async function tcpNode(
  options: Omit<NodeOptions, 'transports'> & { listen?: boolean } = {},
): Promise<LanemuxNode> {
  const { listen = true, ...rest } = options;
  const node = await createNode({ ...rest, transports: [suiteTransports.tcp({ listen })] });
  open.push(node);
  return node;
}

/** Check the invariants on every node, then close them all. */
export async function closeAll(): Promise<void> {
  const nodes = open.splice(0);
  try {
    for (const n of nodes) {
      const m = n.metrics();
      expect(m['velo_streaming_mux_reader_stall_total'], 'reader_stall_total').toBe(0);
      expect(m['velo_streaming_mux_credit_lost_total'], 'credit_lost_total').toBe(0);
    }
  } finally {
    for (const n of nodes) await n.close();
  }
  for (const n of nodes) expect(n.metricsRegistry.liveSlots, 'live_slots after close').toBe(0);
}

/**
 * A TCP relay between a dialler and a listener, so a test can kill the connection (RST both
 * ways) or black-hole it (stop forwarding, keep the sockets open) without touching either node.
 */
export class Relay {
  readonly server: net.Server;
  readonly #pairs: Array<[net.Socket, net.Socket]> = [];
  blackHole = false;
  constructor(target: { host: string; port: number }) {
    this.server = net.createServer((inbound) => {
      const outbound = net.connect(target.port, target.host);
      this.#pairs.push([inbound, outbound]);
      inbound.on('data', (d) => {
        if (!this.blackHole) outbound.write(d);
      });
      outbound.on('data', (d) => {
        if (!this.blackHole) inbound.write(d);
      });
      const kill = (): void => {
        inbound.destroy();
        outbound.destroy();
      };
      inbound.on('error', kill).on('close', kill);
      outbound.on('error', kill).on('close', kill);
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    const a = this.server.address() as net.AddressInfo;
    return `tcp://127.0.0.1:${a.port}`;
  }
  /** Reset every relayed connection, both ways. */
  kill(): void {
    for (const [a, b] of this.#pairs) {
      a.resetAndDestroy();
      b.resetAndDestroy();
    }
  }
  async close(): Promise<void> {
    this.kill();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** `tcp://host:port` → parts. */
export function parseTcp(address: string): { host: string; port: number } {
  const m = /^tcp:\/\/(.+):(\d+)$/.exec(address);
  if (!m) throw new Error(`not a tcp address: ${address}`);
  return { host: m[1]!, port: Number(m[2]) };
}
