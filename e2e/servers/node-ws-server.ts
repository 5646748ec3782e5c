/**
 * The Node e2e server: a lanemux node behind a WebSocket endpoint (`ws` server adapter on our own
 * `http.Server`), serving `generate`. Started in-process by the vitest suites (Node 20 cannot run
 * .ts files directly). `crash()` resets every socket at once, as a killed process would, so a test
 * can restart a server on the same port mid-stream; `cut()` destroys the sockets but keeps the server
 * (a lost link: the same server instance is there when the client dials again).
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createNode } from '../../src/index.ts';
import { MESSENGER_MUX_KEY } from '../../src/messenger/index.ts';
import type { LanemuxNode, MuxConfig, ResumeOptions } from '../../src/index.ts';
import { RESUME_KEY } from '../../src/stream/resume-options.ts';
import { createMessenger } from '../../src/messenger/index.ts';
import type { Messenger } from '../../src/messenger/index.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { serveGenerate } from './generate.ts';
import type { ServedStream } from './generate.ts';

/** A running Node WebSocket server. */
export interface NodeWsServer {
  readonly node: LanemuxNode;
  readonly messenger: Messenger;
  /** `ws://127.0.0.1:PORT/lanemux` */
  readonly url: string;
  readonly port: number;
  /** Streams served, by prompt. */
  readonly served: Map<string, ServedStream>;
  /** Graceful shutdown: the node and messenger close, then the HTTP server. */
  close(): Promise<void>;
  /** Abrupt stop: every TCP socket is destroyed (no close frame, no GOAWAY), then everything is closed. */
  crash(): Promise<void>;
  /**
   * A lost link: every TCP socket is destroyed (no close frame, no GOAWAY) while the server, its node
   * and its streams live on. Returns how many sockets were destroyed.
   */
  cut(): number;
}

/** Options of {@link startNodeWsServer}. */
export interface NodeWsServerOptions {
  /** Port to listen on; 0 for a free one. Defaults to 0. */
  readonly port?: number;
  readonly mux?: MuxConfig;
  /** Resume streams across lost links (the server advertises `lanemux-resume-v1`). Defaults to off. */
  readonly resume?: ResumeOptions;
}

/** Start the Node e2e server on 127.0.0.1. */
export async function startNodeWsServer(options: NodeWsServerOptions = {}): Promise<NodeWsServer> {
  const http: Server = createServer((_req, res) => {
    res.statusCode = 404;
    res.end();
  });
  const sockets = new Set<Socket>();
  http.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port ?? 0, '127.0.0.1', () => {
      http.off('error', reject);
      resolve();
    });
  });
  const port = (http.address() as AddressInfo).port;
  const messenger = await createMessenger({
    transports: [webSocketServerTransport({ server: http })],
    // A node given its messenger resumes only if that messenger advertises the resume key.
    transportKeys: options.resume === undefined ? [MESSENGER_MUX_KEY] : [MESSENGER_MUX_KEY, RESUME_KEY],
    healthCheck: false,
  });
  const node = await createNode({
    messenger,
    mux: options.mux ?? {},
    ...(options.resume !== undefined ? { resume: options.resume } : {}),
  });
  const served = serveGenerate(node, messenger);
  let closed = false;
  const shutdown = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await node.close();
    await messenger.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => http.close(() => r()));
  };
  return {
    node,
    messenger,
    url: `ws://127.0.0.1:${port}/lanemux`,
    port,
    served,
    close: shutdown,
    async crash() {
      for (const s of sockets) s.destroy();
      await shutdown();
    },
    cut() {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      return n;
    },
  };
}
