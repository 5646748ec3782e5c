// The playground's "decode engine": the server half of the playground, shared by the Node
// (WebSocket) and Deno (WebTransport) servers, which only differ in the transport they listen with.
//
// It plays an LLM server: the page creates anchors (the consumer ends of streams), pre-binds them
// and sends their handle + zero-RTT ticket in a `playground.generate` request; the engine opens each
// stream with `openAnchorStream` (no round trip) and, on every forward pass, emits one token per
// live stream. Under the Manual flush policy it calls `flushBatch()` once per pass, so each pass
// leaves as one batch per lane; under Auto the mux's batcher decides.
//
// Messages (names are the playground's own; the mux's `_stream_batch` handlers are reserved):
// - `playground.configure` (request): { flush: 'auto' | 'manual', rate, tokens } → the engine
//   rebuilds its node (a flush policy is fixed per node) and answers { generation, rebuilt }.
// - `playground.generate` (request): { streams: [{ handle, ticket }] } → { opened, failed }.
// - `playground.metrics` (fire-and-forget, engine → page, 4×/s): a JSON snapshot, see #report().
import { z } from 'zod';
import { createNode, parseTicket } from '../dist/index.js';
import { MESSENGER_MUX_KEY } from '../dist/messenger/index.js';
import { createMessenger } from '../dist/messenger/index.js';

const REPORT_MS = 250;
const MAX_STREAMS = 4_096;

const configureSchema = z
  .object({
    flush: z.enum(['auto', 'manual']),
    /** Forward passes per second. */
    rate: z.number().min(1).max(500),
    /** Tokens per stream before it finalizes. */
    tokens: z.number().int().min(1).max(100_000),
  })
  .strict();

const generateSchema = z
  .object({
    streams: z.array(z.object({ handle: z.string().max(128), ticket: z.string().max(1024) }).strict()).max(MAX_STREAMS),
  })
  .strict();

// Tokens are words of this text; each stream starts at its own word.
const TEXT =
  'lanemux carries thousands of small ordered streams over one connection per peer . every stream is a slot ; ' +
  'each forward pass packs the records for a peer into one batch , one write . per-slot credit bounds what a sender ' +
  'may have in flight , so one slow reader never stalls the others . lanes spread the load , and zero-RTT tickets ' +
  'open a stream without a round trip . under Manual the engine flushes once per pass ; under Auto the batcher ' +
  'writes when the task that staged the records ends .';
const WORDS = TEXT.split(' ').map((w) => `${w} `);

/**
 * Create the engine. `transports()` returns fresh listening transports for each generation of the
 * node (a new node per configuration); `lanes` is what the engine offers (the page picks ≤ this).
 *
 * @param {{ transports: () => import('../dist/transport/port.js').TransportAdapter[], lanes?: number, log?: (line: string) => void }} options
 */
export async function createEngine({ transports, lanes = 16, log = () => {} }) {
  const engine = new Engine(transports, lanes, log);
  await engine.rebuild({ flush: 'auto', rate: 20, tokens: 200 });
  return engine;
}

class Engine {
  #transports;
  #lanes;
  #log;
  generation = 0;
  /** @type {z.output<typeof configureSchema>} */
  config = { flush: 'auto', rate: 20, tokens: 200 };
  messenger = null;
  node = null;
  /** Live streams: { sender, lane, sent, start }. */
  #streams = new Set();
  #passTimer = null;
  #reportTimer = null;
  #passes = 0;
  #tokens = 0;
  /** Side by side: streams that each have their own WebSocket (no multiplexer): { ws, sent, start }. */
  #perStream = new Set();
  #psWrites = 0;
  #psWritesLast = 0;
  #stalls = 0;
  #last = null;

  constructor(transports, lanes, log) {
    this.#transports = transports;
    this.#lanes = lanes;
    this.#log = log;
  }

  /** The address pages dial (changes only if the transport picks a new port). */
  get address() {
    return this.messenger?.addresses[0] ?? '';
  }

  /** Replace the node (and its messenger) with one built for `config`. */
  async rebuild(config) {
    await this.#teardown();
    this.config = config;
    this.generation++;
    // The engine builds the messenger itself so it can register the playground's own handlers next
    // to the mux's; createNode then rides it. Health checks are the mux's job on live slots.
    const messenger = await createMessenger({
      transports: this.#transports(),
      lanes: this.#lanes,
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
    });
    const flushPolicy = config.flush === 'manual' ? { kind: 'manual' } : { kind: 'auto', onAdmission: true };
    const node = await createNode({ messenger, mux: { flushPolicy } });
    this.messenger = messenger;
    this.node = node;
    messenger.handle('playground.configure', (_from, body) => this.#configure(body));
    messenger.handle('playground.generate', (_from, body) => this.#generate(body));
    messenger.onPeer((p) => this.#log(`page connected (worker ${p.id}, ${p.lanes} lane${p.lanes === 1 ? '' : 's'})`));
    this.#passTimer = setInterval(() => this.#pass(), 1000 / config.rate);
    this.#reportTimer = setInterval(() => this.#report(), REPORT_MS);
    this.#last = {
      t: performance.now(),
      batches: 0,
      tokens: 0,
      carried: node.metricsRegistry.recordsSent[0],
      passes: 0,
      hist: [...node.metricsRegistry.recordsPerBatchSent.counts],
    };
    this.#log(
      `engine generation ${this.generation}: flush ${config.flush}, ${config.rate} passes/s, ${config.tokens} tokens per stream`,
    );
  }

  async close() {
    await this.#teardown();
    for (const p of this.#perStream) p.ws.close(1001, 'engine closing');
    this.#perStream.clear();
  }

  /**
   * Side by side: a page's plain WebSocket that carries ONE stream, the way an application without a
   * multiplexer would stream (one connection and one write per token). Served by the same passes.
   */
  attachPerStream(ws) {
    if (this.#perStream.size >= MAX_STREAMS) {
      ws.close(1013, 'engine full');
      return;
    }
    const p = { ws, sent: 0, start: (this.#tokens * 7) % WORDS.length };
    this.#perStream.add(p);
    ws.on('close', () => this.#perStream.delete(p));
  }

  async #teardown() {
    clearInterval(this.#passTimer);
    clearInterval(this.#reportTimer);
    this.#streams.clear();
    const { node, messenger } = this;
    this.node = null;
    this.messenger = null;
    await node?.close();
    await messenger?.close();
  }

  #configure(body) {
    const parsed = configureSchema.safeParse(body);
    if (!parsed.success) return { error: `bad configure: ${parsed.error.issues[0]?.message ?? 'invalid'}` };
    const next = parsed.data;
    const rebuild = next.flush !== this.config.flush;
    if (!rebuild) {
      // Rate and stream length are the engine's own knobs: no new node needed.
      this.config = next;
      clearInterval(this.#passTimer);
      this.#passTimer = setInterval(() => this.#pass(), 1000 / next.rate);
      return { generation: this.generation, rebuilt: false };
    }
    // Answer first, then rebuild: the page reconnects when it sees `rebuilt`.
    setTimeout(() => {
      this.rebuild(next).catch((e) => this.#log(`rebuild failed: ${e.message}`));
    }, 50);
    return { generation: this.generation + 1, rebuilt: true };
  }

  async #generate(body) {
    const parsed = generateSchema.safeParse(body);
    if (!parsed.success) return { error: `bad generate: ${parsed.error.issues[0]?.message ?? 'invalid'}` };
    const node = this.node;
    let opened = 0;
    const failed = [];
    await Promise.all(
      parsed.data.streams.map(async ({ handle, ticket }) => {
        if (this.#streams.size >= MAX_STREAMS) {
          failed.push('engine full');
          return;
        }
        try {
          // The ticket says which lane the consumer put the stream on; the engine only counts it.
          const lane = parseTicket(ticket).lane;
          const sender = await node.openAnchorStream(handle, ticket);
          this.#streams.add({ sender, lane, sent: 0, start: (this.#tokens + opened * 7) % WORDS.length });
          opened++;
        } catch (e) {
          failed.push(`${e.code ?? 'ERR'}: ${e.message}`);
        }
      }),
    );
    return { opened, failed: failed.slice(0, 4), failedCount: failed.length };
  }

  /** One forward pass: a token for every live stream, then (Manual) one flush. */
  #pass() {
    const node = this.node;
    if (node === null) return;
    const total = this.config.tokens;
    for (const s of this.#streams) {
      if (s.sender.closed) {
        // The page cancelled the stream (Stop) or the connection went away.
        this.#streams.delete(s);
        continue;
      }
      // trySend: false when the slot is at its byte budget (the producer must wait): count a stall
      // and retry this token on the next pass.
      if (!s.sender.trySend(WORDS[(s.start + s.sent) % WORDS.length])) {
        this.#stalls++;
        continue;
      }
      s.sent++;
      this.#tokens++;
      if (s.sent >= total) {
        this.#streams.delete(s);
        s.sender.finalize().catch(() => {});
      }
    }
    for (const p of this.#perStream) {
      if (p.ws.readyState !== 1) continue;
      // One write per token: what the mux saves.
      p.ws.send(WORDS[(p.start + p.sent) % WORDS.length]);
      this.#psWrites++;
      if (++p.sent >= total) {
        this.#perStream.delete(p);
        p.ws.close(1000, 'done');
      }
    }
    this.#passes++;
    if (this.config.flush === 'manual') node.flushBatch();
  }

  /** Send every connected page a metrics snapshot (fire-and-forget, lane 0). */
  #report() {
    const node = this.node;
    const messenger = this.messenger;
    if (node === null || messenger === null) return;
    const m = node.metricsRegistry;
    const now = performance.now();
    const last = this.#last;
    const dt = Math.max(1e-3, (now - last.t) / 1000);
    const counts = [...m.recordsPerBatchSent.counts];
    const window = counts.map((c, i) => c - (last.hist[i] ?? 0));
    const lanes = [];
    for (const s of this.#streams) {
      lanes[s.lane] ??= { streams: 0 };
      lanes[s.lane].streams++;
    }
    const peers = messenger.peers();
    const batches = m.batchesSent;
    const psWrites = this.#psWrites - this.#psWritesLast;
    this.#psWritesLast = this.#psWrites;
    const report = {
      perStream: { streams: this.#perStream.size, writesPerSec: psWrites / dt, tokensPerSec: psWrites / dt },
      t: Date.now(),
      generation: this.generation,
      config: this.config,
      runtime: typeof globalThis.Deno === 'object' ? 'deno' : 'node',
      activeStreams: this.#streams.size,
      passesPerSec: (this.#passes - last.passes) / dt,
      // Tokens carried: data records the mux wrote to the wire (not what the passes staged, which
      // includes tokens still withheld for credit).
      tokensPerSec: (m.recordsSent[0] - last.carried) / dt,
      tokensStagedPerSec: (this.#tokens - last.tokens) / dt,
      batchesPerSec: (batches - last.batches) / dt,
      tokensTotal: this.#tokens,
      batchesTotal: batches,
      stalls: this.#stalls,
      withheldRecords: m.withheldRecords,
      creditExhaustedTotal: m.slotCreditExhausted,
      recordsPerBatch: { bounds: m.recordsPerBatchSent.bounds, window, total: counts },
      lanes:
        peers.length === 0
          ? []
          : Array.from({ length: peers[0].lanes }, (_, i) => ({
              streams: lanes[i]?.streams ?? 0,
              // Bytes taken for this lane but not yet on the wire: the lane's back-log.
              bufferedBytes: messenger.bufferedAmount(peers[0].id, i),
            })),
    };
    this.#last = {
      t: now,
      batches,
      tokens: this.#tokens,
      carried: m.recordsSent[0],
      passes: this.#passes,
      hist: counts,
    };
    const bytes = new TextEncoder().encode(JSON.stringify(report));
    for (const p of peers) {
      const admitted = messenger.send(p.id, 0, 'playground.metrics', bytes);
      if (admitted !== true) admitted.catch(() => {});
    }
  }
}
