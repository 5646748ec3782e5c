/**
 * The Worker the Cloudflare suite runs inside workerd (bundled by the test with vite):
 * - `/lanemux`: a plain Worker's `fetch` handler serving one lanemux node per request (Workers
 *   forbid one request's I/O from another) that streams `n` tokens into the caller's anchor;
 * - `/hub`: forwarded to the `Hub` Durable Object, which holds ONE link to an engine (a Node process,
 *   `env.ENGINE_URL`) for every client it serves and relays the engine's streams to them with
 *   end-to-end credit (`openRelay`).
 */
import { cloudflareWebSocketTransport } from '../../src/adapters/cloudflare-ws.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { createNode, openRelay, type LanemuxNode } from '../../src/index.ts';
import { createMessenger, MESSENGER_MUX_KEY, type Messenger } from '../../src/messenger/index.ts';

interface Env {
  readonly ENGINE_URL: string;
  readonly HUB: {
    idFromName(name: string): unknown;
    get(id: unknown): { fetch(request: Request): Promise<Response> };
  };
}

/** A node on the Workers adapter (plus a WebSocket client, to dial out), with a messenger to handle requests on. */
async function workerNode(dialOut: boolean): Promise<{
  node: LanemuxNode;
  messenger: Messenger;
  transport: ReturnType<typeof cloudflareWebSocketTransport>;
}> {
  const transport = cloudflareWebSocketTransport();
  const transports = dialOut ? [transport, webSocketClientTransport()] : [transport];
  const messenger = await createMessenger({ transports, transportKeys: [MESSENGER_MUX_KEY] });
  const node = await createNode({ messenger });
  return { node, messenger, transport };
}

const words = ['alpha', 'beta', 'gamma', 'delta'];

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path === '/hub') return env.HUB.get(env.HUB.idFromName('hub')).fetch(request);
    if (path !== '/lanemux') return new Response('not found', { status: 404 });
    const { node, messenger, transport } = await workerNode(false);
    messenger.handle('generate', async (_from, body) => {
      const { handle, n } = body as { handle: string; n: number };
      const sender = await node.attachAnchor<string>(handle);
      for (let i = 0; i < n; i++) await sender.send(`${i}:${words[i % words.length]}`);
      await sender.finalize();
      return { sent: n, runtime: typeof (globalThis as { WebSocketPair?: unknown }).WebSocketPair };
    });
    // The node lives as long as its one client: closed when that peer goes.
    messenger.onPeerGone(() => void node.close().then(() => messenger.close()));
    return transport.fetch(request);
  },
};

/** One engine link for every client of the object. */
export class Hub {
  readonly #env: Env;
  #ready: Promise<{ node: LanemuxNode; transport: ReturnType<typeof cloudflareWebSocketTransport> }> | undefined;

  constructor(_state: unknown, env: Env) {
    this.#env = env;
  }

  async #start(): Promise<{ node: LanemuxNode; transport: ReturnType<typeof cloudflareWebSocketTransport> }> {
    const { node, messenger, transport } = await workerNode(true);
    const engine = await node.connect(this.#env.ENGINE_URL);
    messenger.handle('chat', async (_from, body) => {
      const { handle, n } = body as { handle: string; n: number };
      // The client's anchor is the relay's target; the engine streams into the relay's source.
      const r = await openRelay<string>(node, handle);
      const answer = (await messenger.request(engine, 'generate', { handle: r.source.handle, n })) as { sent: number };
      const end = await r.done;
      return { sent: answer.sent, relayed: r.relayed, end: end?.code ?? null, links: messenger.peers().length };
    });
    return { node, transport };
  }

  async fetch(request: Request): Promise<Response> {
    this.#ready ??= this.#start();
    const { transport } = await this.#ready;
    return transport.fetch(new Request(request.url.replace(/\/hub$/, '/lanemux'), request));
  }
}
