// Over real TCP sockets, 1,000 lost links while 64 streams flow (docs/protocol.md §8.3): a proxy between the
// two nodes cuts both sides at seeded moments (right as the link comes back, mid-replay, or while items
// flow), the producer re-dials by itself after each. Every stream ends with exactly its items in order;
// none hangs (every 25 cuts, every stream must deliver an item handed over after that cut); live slots and
// binds return to 0; the heap after the last cut is within a bound of the heap after a warm-up. A cut
// longer than the resume window ends the streams retryable with reason `window`.
//
// Replay a run's moments with LANEMUX_CUTS_SEED=<seed> (every failure message names the seed).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import { ResumeFailedError } from '../../src/stream/errors.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { Conditions } from '../support/condition.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { waitFor } from '../support/wait-for.ts';
import { closeProxies, tcpProxy } from '../support/tcp-proxy.ts';
import { closeAll, tcpNode } from './helpers.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

// A fixed schedule, so a CI run is the same run every time; set LANEMUX_CUTS_SEED to explore others.
const SEED = Number(process.env['LANEMUX_CUTS_SEED'] ?? 80_851_307) >>> 0;
const STREAMS = 64;
const CUTS = 1_000;
/** Every this many cuts, every stream must deliver an item handed over after the cut. */
const CHECK_EVERY = 25;
/** The heap is measured after this many cuts (everything warm) and after the last one. */
const WARM_UP_CUTS = 100;
/** Most the heap may grow from the warm-up to the end: 900 cuts leaking ~9 KiB each would pass it. */
const HEAP_GROWTH_MAX = 8 * 1024 * 1024;
/** Longest a single wait may take on a loaded machine (one link back, one stream's next item). */
const WAIT_MS = 10_000;

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    await closeProxies();
  }
});

function portOf(node: LanemuxNode): number {
  return Number(new URL(node.address.replace('tcp://', 'http://')).port);
}

function heapAfterGc(): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;

describe('resume over TCP, 1,000 cuts', () => {
  it('1,000 seeded link cuts while 64 streams flow, each followed by a re-dial: every stream exact and in order, none hangs, live slots and binds 0, heap flat', {
    timeout: 120_000,
  }, async () => {
    const rng = seededRandom(SEED);
    const at = (what: string): string => `${what} [seed ${SEED}]`;
    const cond = new Conditions();
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    const link = await tcpProxy(portOf(consumer));

    // The producer's view of the consumer: links formed (`up`, `resumed`) and lost.
    let linksUp = 0;
    let downs = 0;
    let cutNextLink = false;
    const recent: string[] = [];
    producer.onPeerState((e) => {
      recent.push(`${e.type}@${e.epoch}`);
      if (recent.length > 8) recent.shift();
      if (e.type === 'down') downs++;
      if (e.type === 'up' || e.type === 'resumed') {
        linksUp++;
        // A cut right as the link forms: the resume attaches of every stream are about to go out.
        if (cutNextLink) {
          cutNextLink = false;
          link.cut();
        }
      }
      cond.notify();
    });
    await producer.connect(link.address, { reconnect: { initialDelayMs: 2, jitterMs: 0, factor: 1 } });

    // Consumer: each item must be the next number of its stream (checked as it arrives, nothing kept).
    const received = new Int32Array(STREAMS);
    const ended: Array<unknown> = Array.from({ length: STREAMS }, () => undefined);
    let total = 0;
    let fault: string | null = null;
    // The streams that have not yet delivered an item handed over after the latest checked cut.
    const mark = new Int32Array(STREAMS);
    const past = new Uint8Array(STREAMS).fill(1);
    let behind = 0;
    const anchors = Array.from({ length: STREAMS }, () => consumer.createAnchor<number>());
    anchors.forEach((anchor, i) => {
      anchor.consume({
        item(v) {
          const n = received[i]!;
          if (v !== n) fault ??= `stream ${i}: item #${n} is ${JSON.stringify(v)}`;
          received[i] = n + 1;
          total++;
          if (past[i] === 0 && n + 1 > mark[i]!) {
            past[i] = 1;
            behind--;
          }
          cond.notify();
        },
        end(error) {
          ended[i] = error ?? null;
          cond.notify();
        },
      });
    });

    // Producer: a decode engine's forward pass every millisecond, one numbered item per stream per pass. Not
    // as fast as credit allows: `send()` stages up to the slot's byte budget (thousands of small items), and a
    // lag that long would make every resume replay it and the per-cut progress check wait for it.
    let stopping = false;
    const handed = new Int32Array(STREAMS);
    let passWaiters: Array<() => void> = [];
    const passes = setInterval(() => {
      const due = passWaiters;
      passWaiters = [];
      for (const w of due) w();
    }, 1);
    onTestFinished(() => clearInterval(passes));
    const nextPass = (): Promise<void> => new Promise((r) => passWaiters.push(r));
    async function produce(sender: StreamSender<number>, k: number): Promise<number | unknown> {
      let i = 0;
      try {
        while (!stopping) {
          handed[k] = i + 1;
          await sender.send(i++);
          await nextPass();
        }
        await sender.finalize();
        return i;
      } catch (error) {
        return error;
      }
    }
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<number>(a.handle)));
    const writes = senders.map((s, k) => produce(s, k));

    const first = (): string => {
      const i = Array.from(past).indexOf(0);
      return i < 0 ? 'none' : `#${i}: received ${received[i]}, mark ${mark[i]}, handed ${handed[i]}`;
    };
    const state = (): string =>
      `cut ${cut}, links up ${linksUp}, downs ${downs}, last peer events ${recent.join(' ')}, ${behind} streams behind ` +
      `(first: ${first()}), items ${total}, live slots consumer ${consumer.metricsRegistry.liveSlots} ` +
      `producer ${producer.metricsRegistry.liveSlots}${fault === null ? '' : `, fault: ${fault}`}`;

    let cut = 0;
    let heapWarm = 0;
    let nextCheck = 0;
    const modes = { atLink: 0, midReplay: 0, flowing: 0 };
    for (; cut < CUTS && fault === null; cut++) {
      if (heapWarm === 0 && cut >= WARM_UP_CUTS) heapWarm = heapAfterGc();
      if (cut >= nextCheck) {
        nextCheck += CHECK_EVERY;
        // None hangs: every stream delivers an item that was handed over after the last checked cut.
        await cond.until(() => behind === 0 || fault !== null, at('every stream past its cut item'), WAIT_MS, state);
        mark.set(handed);
        past.fill(0);
        behind = STREAMS;
      }
      const r = rng();
      const up = linksUp;
      if (r < 0.15) {
        // This cut, then another right as the re-dialled link forms (two cuts, one reconnect).
        modes.atLink++;
        cutNextLink = true;
        link.cut();
        await cond.until(
          () => linksUp >= up + 2 || fault !== null,
          at('the link back after a cut at link-up'),
          WAIT_MS,
          state,
        );
        cut++;
        continue;
      }
      // Let some items through first: a few (replay still going on) or many (streams flowing).
      const more = r < 0.4 ? Math.floor(rng() * 16) : 16 + Math.floor(rng() * 640);
      if (r < 0.4) modes.midReplay++;
      else modes.flowing++;
      const base = total;
      await cond.until(() => total >= base + more || fault !== null, at(`${more} more items`), WAIT_MS, state);
      link.cut();
      await cond.until(() => linksUp > up || fault !== null, at('the link back after a cut'), WAIT_MS, state);
    }
    expect(fault, at('first wrong item')).toBeNull();
    const heapEnd = heapAfterGc();

    stopping = true;
    cond.notify();
    let finished = 0;
    const sent: unknown[] = [];
    writes.forEach((w, k) =>
      w.then((v) => {
        sent[k] = v;
        finished++;
        cond.notify();
      }),
    );
    await cond.until(() => finished === STREAMS, at('every producer to finalize'), WAIT_MS, state);
    await cond.until(() => ended.every((e) => e !== undefined), at('every stream to end'), WAIT_MS, state);
    for (let i = 0; i < STREAMS; i++) {
      expect(typeof sent[i], at(`stream ${i}'s producer: ${String(sent[i])}`)).toBe('number');
      expect(ended[i], at(`stream ${i}'s end`)).toBeNull();
      expect(received[i], at(`stream ${i}: items received = items sent`)).toBe(sent[i]);
    }
    expect(fault, at('first wrong item')).toBeNull();
    expect(downs, at('links lost')).toBeGreaterThanOrEqual(CUTS);
    const m = producer.metrics();
    expect(m['velo_streaming_resumed_streams_total'], at('streams resumed')).toBeGreaterThanOrEqual(STREAMS * 100);
    const failures = Object.entries({ ...m, ...consumer.metrics() }).filter(
      ([k, v]) => k.includes('resume_failed_total') && v > 0,
    );
    expect(failures, at('resume failures')).toEqual([]);
    // No event says a slot retired: the one polling wait.
    await waitFor(
      () =>
        consumer.metricsRegistry.liveSlots === 0 &&
        producer.metricsRegistry.liveSlots === 0 &&
        consumer.metrics()['velo_streaming_mux_live_binds'] === 0 &&
        producer.metrics()['velo_streaming_mux_live_binds'] === 0,
      WAIT_MS,
      at(`live slots and binds back to 0 (${state()})`),
    );
    expect(
      heapEnd - heapWarm,
      at(`heap growth from cut ${WARM_UP_CUTS} (${mib(heapWarm)}) to cut ${CUTS} (${mib(heapEnd)})`),
    ).toBeLessThan(HEAP_GROWTH_MAX);
    console.log(
      `resume-1000-cuts: seed ${SEED}, ${downs} links lost, ${total} items, cuts at link-up ${modes.atLink}×2, ` +
        `mid-replay ${modes.midReplay}, flowing ${modes.flowing}; heap ${mib(heapWarm)} → ${mib(heapEnd)}`,
    );
  });

  it('a cut longer than the resume window (300 ms) ends every stream ResumeFailedError `window`, retryable, on both ends; a stream opened after the link is back completes', async () => {
    const WINDOW = 300;
    const N = 8;
    const cond = new Conditions();
    const consumer = await tcpNode({ resume: { windowMs: WINDOW } });
    const producer = await tcpNode({ listen: false, resume: { windowMs: WINDOW } });
    const link = await tcpProxy(portOf(consumer));
    let downs = 0;
    producer.onPeerState((e) => {
      if (e.type === 'down') downs++;
      cond.notify();
    });
    // No re-dial: the link stays down until the test dials again, past the window.
    await producer.connect(link.address);
    const anchors = Array.from({ length: N }, () => consumer.createAnchor<number>());
    const received = new Int32Array(N);
    const ended: unknown[] = Array.from({ length: N }, () => undefined);
    let total = 0;
    anchors.forEach((anchor, i) => {
      anchor.consume({
        item() {
          received[i]!++;
          total++;
          cond.notify();
        },
        end(error) {
          ended[i] = error ?? null;
          cond.notify();
        },
      });
    });
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<number>(a.handle)));
    const failed: unknown[] = Array.from({ length: N }, () => undefined);
    senders.forEach(async (sender, k) => {
      try {
        for (let i = 0; ; i++) await sender.send(i);
      } catch (error) {
        failed[k] = error;
        cond.notify();
      }
    });
    const state = (): string =>
      `downs ${downs}, items ${total}, consumer ends ${ended.filter((e) => e !== undefined).length}/${N}, ` +
      `producer failures ${failed.filter((e) => e !== undefined).length}/${N}`;
    await cond.until(() => total >= N * 20, 'items flowing on every stream', WAIT_MS, state);

    const t0 = performance.now();
    link.cut();
    await cond.until(() => downs > 0, "the producer's 'down' for the cut link", WAIT_MS, state);
    await cond.until(
      () => ended.every((e) => e !== undefined) && failed.every((e) => e !== undefined),
      'every stream to fail on both ends once the window passed',
      WAIT_MS,
      state,
    );
    // Neither end gave up before its window (a margin for the timer's granularity).
    expect(performance.now() - t0).toBeGreaterThanOrEqual(WINDOW - 20);
    for (const [side, errors] of [
      ['consumer', ended],
      ['producer', failed],
    ] as const) {
      for (const e of errors) {
        expect(e, `${side}: ${String(e)}`).toBeInstanceOf(ResumeFailedError);
        const r = e as ResumeFailedError;
        expect(isLanemuxError(r, 'ERR_SENDER_DROPPED'), `${side}: ${r.code}`).toBe(true);
        expect(r.reason, side).toBe('window');
        expect(r.retryable, side).toBe(true);
      }
    }
    expect((ended[0] as Error).message).toContain(`${WINDOW} ms`);
    expect(consumer.metrics()['velo_streaming_resume_failed_total{reason="window"}']).toBe(N);
    expect(producer.metrics()['velo_streaming_resume_failed_total{reason="window"}']).toBe(N);

    // The link comes back: the failed streams stay failed, a new one works.
    await producer.connect(link.address);
    const anchor = consumer.createAnchor<number>();
    const sender = await producer.attachAnchor<number>(anchor.handle);
    for (let i = 0; i < 10; i++) await sender.send(i);
    await sender.finalize();
    const items: number[] = [];
    for await (const v of anchor) items.push(v);
    expect(items).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await waitFor(
      () => consumer.metricsRegistry.liveSlots === 0 && producer.metricsRegistry.liveSlots === 0,
      WAIT_MS,
      'live slots back to 0',
    );
  });
});
