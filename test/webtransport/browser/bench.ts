// Echo round trips and one-way throughput of 64-byte messages over a lanemux messenger, against
// echo-server.deno.ts. Runs in Chromium (bundled by vite) and in Deno (bench.deno.ts): only standard APIs.
import { createMessenger } from '../../../src/messenger/messenger.ts';
import type { TransportAdapter } from '../../../src/transport/port.ts';

export interface BenchOptions {
  readonly address: string;
  readonly lanes: number;
  readonly transport: () => TransportAdapter;
  /** Sequential echo round trips to time. */
  readonly rtts?: number;
  /** Messages in the throughput run. */
  readonly messages?: number;
}

export interface BenchResult {
  readonly connectMs: number;
  readonly rttP50Ms: number;
  readonly rttP99Ms: number;
  readonly rttMeanMs: number;
  readonly rttCount: number;
  readonly messagesPerSecond: number;
  readonly messages: number;
  readonly requestEcho: string;
}

export async function runBench(o: BenchOptions): Promise<BenchResult> {
  const client = await createMessenger({
    transports: [o.transport()],
    lanes: o.lanes,
    maxMessageSize: 256 * 1024,
    healthCheck: false,
  });
  try {
    const t0 = performance.now();
    const peer = await client.connect(o.address, { timeoutMs: 10_000 });
    const connectMs = performance.now() - t0;
    const requestEcho = (await client.request(peer.id, 'echo', 'hello over webtransport')) as string;

    // Round trips: a 64-byte batch echoed back on lane 0, one at a time.
    let wake: (() => void) | undefined;
    const n = o.rtts ?? 1000;
    const rtts: number[] = [];
    let echoes = 0;
    client.registerBatchHandler(0, (_f, _l, p) => {
      if (p.byteLength === 64 && p[0] === 1) echoes++;
      wake?.();
    });
    const msg = new Uint8Array(64);
    msg[0] = 1;
    for (let i = 0; i < n + 50; i++) {
      const back = new Promise<void>((r) => (wake = r));
      const a = performance.now();
      const adm = client.sendBatch(peer.id, 0, msg);
      if (adm !== true) await adm;
      await back;
      if (i >= 50) rtts.push(performance.now() - a); // the first 50 warm up
    }
    rtts.sort((x, y) => x - y);
    if (echoes !== n + 50) throw new Error(`expected ${n + 50} echoes, got ${echoes}`);
    const rttMeanMs = rtts.reduce((a, b) => a + b, 0) / rtts.length;

    // Throughput: `messages` 64-byte batches spread over every lane, until the server says done.
    const total = o.messages ?? 100_000;
    await client.request(peer.id, 'expect', total);
    const done = new Promise<void>((r) => client.on('done', () => r()));
    const body = new Uint8Array(64);
    const s = performance.now();
    for (let i = 0; i < total; i++) {
      const adm = client.sendBatch(peer.id, i % o.lanes, body);
      if (adm !== true) await adm;
    }
    await done;
    const secs = (performance.now() - s) / 1000;
    return {
      connectMs: round(connectMs),
      rttP50Ms: round(rtts[Math.floor(rtts.length * 0.5)] as number),
      rttP99Ms: round(rtts[Math.floor(rtts.length * 0.99)] as number),
      rttMeanMs: round(rttMeanMs),
      rttCount: rtts.length,
      messagesPerSecond: Math.round(total / secs),
      messages: total,
      requestEcho,
    };
  } finally {
    await client.close();
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
