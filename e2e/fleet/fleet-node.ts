/**
 * One process of the fleet test: an engine, a frontend or a Node consumer, each a lanemux node on
 * loopback, driven over stdin/stdout JSON lines (see control.ts). Bundled once per test file by
 * harness.ts, so a child starts without transpiling the sources.
 *
 * - engine: TCP listener registered through discovery (metadata `role: engine`), serving
 *   `e2e.generate` (open the stream from the ticket, send tokens), as the single-server e2e does.
 * - frontend: TCP + WebSocket listener registered through discovery; serves `e2e.generate` to its
 *   consumers (Node consumers over TCP, pages over WebSocket) by `openRelay` to the consumer's
 *   anchor and forwarding the request, with the relay's source handle and ticket, to an engine it
 *   found with a discovery watch (round robin; an engine that does not answer is skipped).
 * - consumer: dials one frontend and streams requests from it, reading (or, stalled, never reading).
 *
 * argv: <role> <JSON config>.
 */
import { createInterface } from 'node:readline';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import type { Discovery } from '../../src/discovery/discovery.ts';
import { LanemuxError, createNode, isLanemuxError, openRelay } from '../../src/index.ts';
import type { LanemuxNode, MuxConfig, Relay } from '../../src/index.ts';
import { MESSENGER_MUX_KEY, createMessenger } from '../../src/messenger/index.ts';
import type { Messenger } from '../../src/messenger/index.ts';
import type { TransportAdapter } from '../../src/transport/port.ts';
import { serveGenerate } from '../servers/generate.ts';
import { GENERATE_HANDLER, checkOrder } from '../support/protocol.ts';
import type { GenerateRequest } from '../support/protocol.ts';

interface Config {
  readonly store: 'etcd' | 'nats';
  readonly discovery: Record<string, unknown>;
  readonly mux?: MuxConfig;
  /** consumer: the frontend's TCP address. */
  readonly frontend?: string;
}

const [role, json] = process.argv.slice(2) as [string, string];
const config = JSON.parse(json) as Config;

const out = (line: unknown): void => {
  process.stdout.write(`${JSON.stringify(line, (_k, v) => (typeof v === 'bigint' ? v.toString(16) : v))}\n`);
};
const errorInfo = (e: unknown): { code: string; retryable: boolean; message: string } =>
  isLanemuxError(e)
    ? { code: e.code, retryable: e.retryable, message: e.message }
    : { code: 'NOT_LANEMUX', retryable: false, message: String(e) };
const hex = (id: bigint): string => id.toString(16).padStart(16, '0');

async function discoveryClient(): Promise<Discovery> {
  return config.store === 'etcd'
    ? (await import('../../src/discovery/etcd.ts')).etcdDiscovery(config.discovery)
    : (await import('../../src/discovery/nats.ts')).natsDiscovery(config.discovery);
}

async function start(
  transports: TransportAdapter[],
  register: false | { metadata: Record<string, string> },
): Promise<{ node: LanemuxNode; messenger: Messenger }> {
  const messenger = await createMessenger({ transports, transportKeys: [MESSENGER_MUX_KEY], healthCheck: false });
  const node = await createNode({
    messenger,
    mux: config.mux ?? {},
    ...(register === false ? {} : { discovery: { client: await discoveryClient(), register } }),
  });
  return { node, messenger };
}

/** Commands every role answers; a role adds its own. */
type Commands = Record<string, (args: Record<string, unknown>) => unknown>;

function serve(commands: Commands): void {
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const { id, cmd, args } = JSON.parse(line) as { id: number; cmd: string; args?: Record<string, unknown> };
    Promise.resolve()
      .then(() => {
        const f = commands[cmd];
        if (f === undefined) throw new Error(`unknown command ${cmd}`);
        return f(args ?? {});
      })
      .then(
        (value) => out({ id, ok: true, value }),
        (e: unknown) => out({ id, ok: false, error: errorInfo(e) }),
      );
  });
  // The test closes stdin (or kills us): no orphan outlives it.
  rl.on('close', () => process.exit(0));
}

// ───────────── engine ─────────────

async function engine(): Promise<void> {
  const { node, messenger } = await start([tcpTransport({ host: '127.0.0.1', port: 0 })], {
    metadata: { role: 'engine' },
  });
  const served = serveGenerate(node, messenger);
  serve({
    metrics: () => node.metrics(),
    served: () =>
      [...served.values()].map((s) => ({
        prompt: s.prompt,
        accepted: s.accepted,
        waiting: s.waiting,
        outcome: s.outcome,
        sendErrorCode: s.sendErrorCode,
        cancelReason: s.cancelReason,
      })),
    close: async () => {
      await node.close();
      await messenger.close();
    },
  });
  out({ event: 'ready', workerId: hex(node.workerId), address: node.address });
}

// ───────────── frontend ─────────────

interface Relayed {
  readonly prompt: string;
  readonly relay: Relay<string>;
  engine: string | null;
  maxHeld: number;
  end: string | null;
  endMs: number | null;
}

async function frontend(): Promise<void> {
  const { node, messenger } = await start(
    [tcpTransport({ host: '127.0.0.1', port: 0 }), webSocketServerTransport({ host: '127.0.0.1', port: 0 })],
    { metadata: { role: 'frontend' } },
  );
  // Engines as the store has them: a watch (its own client) of records with role engine.
  const engines = new Map<string, string>();
  const watcher = await discoveryClient();
  const watch = watcher.watch();
  let synced!: () => void;
  const isSynced = new Promise<void>((r) => (synced = r));
  void (async () => {
    try {
      for await (const ev of watch) {
        if (ev.type === 'synced') synced();
        else if (ev.type === 'put' && ev.registration.metadata['role'] === 'engine')
          engines.set(hex(ev.workerId), ev.registration.addresses['tcp'] ?? '');
        else if (ev.type === 'delete') engines.delete(hex(ev.workerId));
        if (ev.type !== 'synced') out({ event: 'engines', engines: [...engines.keys()] });
      }
    } catch (e) {
      // A watch that could not resume ends: the engines known so far stay (the test sees the event).
      out({ event: 'watch-ended', error: errorInfo(e) });
    }
  })();
  await isSynced;

  const relays = new Map<string, Relayed>();
  let next = 0;
  /** Forward one request to an engine; the next one on failure. Resolves with the engine's worker id. */
  const forward = async (req: GenerateRequest): Promise<string> => {
    const order = [...engines.entries()];
    // Taken before any await: requests that arrive together spread over the engines.
    const first = next++;
    let last: unknown = new LanemuxError('ERR_UNKNOWN_PEER', 'discovery has no engine');
    for (let k = 0; k < order.length; k++) {
      const [worker, address] = order[(first + k) % order.length]!;
      try {
        if (messenger.peer(worker) === undefined) await messenger.connect(address, { timeoutMs: 1000 });
        await messenger.request(worker, GENERATE_HANDLER, req, { timeoutMs: 2000 });
        return worker;
      } catch (e) {
        last = e;
      }
    }
    throw last;
  };
  messenger.handle(GENERATE_HANDLER, async (_from, body) => {
    const req = body as GenerateRequest;
    const relay = await openRelay<string>(node, req.handle, { ticket: req.ticket });
    const rec: Relayed = { prompt: req.prompt, relay, engine: null, maxHeld: 0, end: null, endMs: null };
    relays.set(req.prompt, rec);
    const t0 = Date.now();
    void relay.done.then((e) => {
      rec.end = e === null ? 'finalized' : e.code;
      rec.endMs = Date.now() - t0;
    });
    try {
      rec.engine = await forward({ ...req, handle: relay.source.handle, ticket: node.prebindAnchor(relay.source)! });
    } catch (e) {
      relay.cancel();
      throw e;
    }
    return { ok: true };
  });
  // The most records the frontend held for each relayed stream, sampled.
  const sampler = setInterval(() => {
    for (const r of relays.values()) if (r.end === null) r.maxHeld = Math.max(r.maxHeld, r.relay.held);
  }, 5);
  sampler.unref();
  serve({
    metrics: () => node.metrics(),
    engines: () => [...engines.keys()],
    relays: () =>
      [...relays.values()].map((r) => ({
        prompt: r.prompt,
        engine: r.engine,
        held: r.relay.held,
        maxHeld: r.maxHeld,
        relayed: r.relay.relayed,
        creditLimit: r.relay.source.credit?.limit ?? null,
        end: r.end,
        endMs: r.endMs,
      })),
    cancel: (args) => relays.get(args['prompt'] as string)?.relay.cancel(),
  });
  const ws = messenger.addresses.find((a) => a.startsWith('ws://'));
  out({ event: 'ready', workerId: hex(node.workerId), address: node.address, ws });
}

// ───────────── consumer ─────────────

interface Consumed {
  readonly prompt: string;
  tokens: number;
  ordered: boolean;
  end: string | null;
  retryable: boolean | null;
}

async function consumer(): Promise<void> {
  const { node, messenger } = await start([tcpTransport({ listen: false })], false);
  const info = await messenger.connect(config.frontend!, { timeoutMs: 5000 });
  const streams = new Map<string, Consumed>();
  const anchors = new Map<string, ReturnType<LanemuxNode['createAnchor']>>();
  const generate = async (prompt: string, n: number, delayMs: number, read: boolean): Promise<void> => {
    const anchor = node.createAnchor<string>();
    const ticket = node.prebindAnchor(anchor)!;
    const rec: Consumed = { prompt, tokens: 0, ordered: true, end: null, retryable: null };
    streams.set(prompt, rec);
    anchors.set(prompt, anchor);
    const body: GenerateRequest = { handle: anchor.handle, ticket, prompt, n, delayMs, tail: 0 };
    await messenger.request(info.id, GENERATE_HANDLER, body, { timeoutMs: 10_000 });
    if (!read) return;
    void (async () => {
      const got: string[] = [];
      try {
        for await (const t of anchor) got.push(t);
        rec.end = 'finalized';
      } catch (e) {
        rec.end = errorInfo(e).code;
        rec.retryable = errorInfo(e).retryable;
      }
      rec.tokens = got.length;
      rec.ordered = checkOrder(prompt, got).ok && got.length <= n;
      out({ event: 'end', ...rec });
    })();
  };
  serve({
    metrics: () => node.metrics(),
    /** Start `count` requests `<prefix><i>` of `n` tokens; resolves once the frontend answered each. */
    generate: async (args) => {
      const { prefix, count, n, delayMs, read } = args as {
        prefix: string;
        count: number;
        n: number;
        delayMs: number;
        read: boolean;
      };
      const prompts = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
      await Promise.all(prompts.map((p) => generate(p, n, delayMs, read)));
      return prompts;
    },
    streams: () => [...streams.values()],
    /** Cancel the unread (stalled) streams: their relays and producers are released. */
    cancelAll: () => {
      for (const [prompt, a] of anchors) if (streams.get(prompt)?.end === null) a.cancel();
    },
  });
  out({ event: 'ready', workerId: hex(node.workerId) });
}

const roles: Record<string, () => Promise<void>> = { engine, frontend, consumer };
await roles[role]!();
