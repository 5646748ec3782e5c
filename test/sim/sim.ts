/**
 * One simulated history: real lanemux nodes (createNode: messenger, mux, streams) on a
 * {@link SimWorld} clock over a {@link SimNetwork}, running a workload drawn from the seed, with the
 * invariants checked every few events. The same seed replays the same history event for event.
 */
import { LanemuxError } from '../../src/errors.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { SimNetwork, type WireFault } from './sim-network.ts';
import { Prng, SimWorld } from './sim-runtime.ts';

/** A fault to inject, to prove the checker catches it. */
export type SimFault = WireFault | { readonly kind: 'credit' };

export interface SimOptions {
  readonly seed: number;
  readonly fault?: SimFault | undefined;
  /** Keep a line per notable event (cuts, jumps, stream ends). */
  readonly trace?: boolean;
  /** Called after every event (debugging a seed: read the nodes' metrics as the history runs). */
  readonly observe?: ((time: number, nodes: readonly LanemuxNode[]) => void) | undefined;
  /** Check the invariants every this many events. Defaults to 32. */
  readonly checkEvery?: number;
  /** `mux.autoCredit` in every node; false runs static credit windows. Defaults to true (the library default). */
  readonly autoCredit?: boolean;
}

export interface SimReport {
  readonly seed: number;
  readonly ok: boolean;
  readonly failures: string[];
  readonly trace: string[];
  readonly events: number;
  readonly virtualMs: number;
  readonly nodes: number;
  readonly streams: number;
  readonly items: number;
  /** What ran: macrotasks, timers fired, frames and bytes on the wire, the most bytes in flight at once. */
  readonly counts: {
    macrotasks: number;
    timers: number;
    frames: number;
    wireBytes: number;
    peakInFlight: number;
    resumed: number;
  };
  /** How the streams ended: `ok` or an error code. */
  readonly endings: Record<string, number>;
  /** A hash of the history (times, events, deliveries): equal for equal seeds. */
  readonly fingerprint: string;
}

interface Plan {
  readonly id: number;
  readonly consumer: number;
  readonly producer: number;
  readonly items: string[];
  readonly startAt: number;
  readonly gaps: number[];
  readonly stallAt: number;
  readonly stallMs: number;
  readonly readGaps: number[];
  readonly readStallAt: number;
  readonly readStallMs: number;
  /** The consumer gives up (ends its iteration) after this many records; -1: reads to the end. */
  readonly cancelAt: number;
  /** The consumer reads in push mode (`consume()`, pausing for its gaps and stalls) instead of `for await`. */
  readonly push: boolean;
}

interface Live {
  readonly plan: Plan;
  received: number;
  ended: boolean;
  endedAt: number;
  ending: string;
  producerDone: boolean;
  producerOutcome: string;
  attached: boolean;
}

/** Re-dial quickly (well within the shortest resume window drawn), and never give up during a run. */
const RECONNECT = { initialDelayMs: 20, jitterMs: 80, factor: 1.5, maxDelayMs: 200, maxDownMs: 600_000 };

/** Items that start with this are sent with `sender.error(item)`. */
const ERROR_MARK = '!';
const STABLE_CODE = /^ERR_[A-Z0-9_]+$/;

/** The replay command for a seed. */
export const replayCommand = (seed: number): string => `npm run sim -- --seed ${seed}`;

/** Run one seed to its end and judge it. */
export async function runSeed(options: SimOptions): Promise<SimReport> {
  // No stack traces while a seed runs: the errors' codes and messages are all it checks, and
  // capturing a stack for each of the thousands of errors a history makes (every closed connection,
  // every lost link) was a tenth of its time. Only the capture changes, not a code path.
  const stackLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return await runSeedTraced(options);
  } finally {
    Error.stackTraceLimit = stackLimit;
  }
}

async function runSeedTraced(options: SimOptions): Promise<SimReport> {
  const seed = options.seed >>> 0;
  const checkEvery = options.checkEvery ?? 32;
  const world = new SimWorld(seed);
  const plan = new Prng(seed ^ 0x5bd1e995); // the workload: independent of the schedule
  const fault = options.fault;
  const net = new SimNetwork(world, fault !== undefined && fault.kind !== 'credit' ? fault : undefined);
  const failures: string[] = [];
  const trace: string[] = [];
  let hash = 0x811c9dc5;
  const mix = (n: number): void => {
    hash = Math.imul(hash ^ (n | 0), 0x01000193) >>> 0;
  };
  const note = (line: string): void => {
    if (options.trace === true) trace.push(`t=${world.time} ${line}`);
  };
  const fail = (why: string): void => {
    if (failures.length < 20) failures.push(`t=${world.time}: ${why}`);
  };
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => world.after(ms, resolve));

  // --- The cluster, drawn from the seed.
  const n = plan.int(2, 4);
  const resume = plan.chance(0.7);
  const windowMs = plan.int(300, 3_000);
  const heartbeat = plan.pick([100, 250, 500]);
  const nodes: LanemuxNode[] = [];
  const names: string[] = [];
  const credit: number[] = [];
  for (let i = 0; i < n; i++) {
    const name = `n${i}`;
    names.push(name);
    credit.push(plan.int(1, 8));
    nodes.push(
      await createNode({
        transports: [net.adapter(name)],
        runtime: world.runtime(name),
        lanes: plan.int(1, 3),
        unattachedTimeout: 2_000,
        resume: resume ? { windowMs } : false,
        mux: {
          initialCredit: credit[i]!,
          maxBatchBytes: plan.pick([256, 1024, 61_440]),
          heartbeatInterval: heartbeat,
          healthCheckInterval: 1_000,
          healthCheckTimeout: 1_000,
          replyLinger: plan.pick([0, 1, 5]),
          autoCredit: options.autoCredit !== false,
        },
      }),
    );
  }
  note(
    `${n} nodes, resume ${resume ? `${windowMs} ms` : 'off'}, heartbeat ${heartbeat} ms, credit ${credit.join('/')}`,
  );

  // Run the world until `p` settles (or `limit` virtual ms pass).
  const drive = async (p: Promise<unknown>, limit: number): Promise<boolean> => {
    let settled = false;
    p.then(
      () => (settled = true),
      () => (settled = true),
    );
    const until = world.time + limit;
    await Promise.resolve();
    while (!settled && (await world.step(until))) {}
    return settled;
  };

  // Every pair linked, the higher-numbered node dialling, re-dialling whenever the link is lost.
  for (let j = 1; j < n; j++)
    for (let i = 0; i < j; i++) {
      const linking = nodes[j]!.connect(`sim://${names[i]}`, { reconnect: RECONNECT });
      let linked = false;
      linking.then(
        () => (linked = true),
        () => {},
      );
      // Without a wire fault every first link forms.
      if (!(await drive(linking, 11_000)) || (!linked && net.fault === undefined))
        fail(`n${j} could not link to n${i}`);
    }
  const t0 = world.time;

  // --- The workload.
  const plans: Plan[] = [];
  const nStreams = plan.int(1, 6);
  for (let s = 0; s < nStreams; s++) {
    const consumer = plan.int(0, n - 1);
    const producer = (consumer + plan.int(1, n - 1)) % n;
    const count = plan.int(0, 20);
    const pad = 'x'.repeat(plan.pick([0, 4, 40, 300]));
    // A SenderError (`sender.error`) is a record too: not terminal, it spends credit like an item.
    const errorAt = plan.chance(0.15) ? plan.int(0, count) : -1;
    const items = Array.from({ length: count }, (_, k) => `${k === errorAt ? ERROR_MARK : ''}${s}:${k}:${pad}`);
    plans.push({
      id: s,
      consumer,
      producer,
      items,
      startAt: plan.int(0, 400),
      gaps: items.map(() => (plan.chance(0.6) ? 0 : plan.int(1, 80))),
      stallAt: plan.chance(0.15) ? plan.int(0, count) : -1,
      stallMs: plan.int(200, 2_500),
      readGaps: items.map(() => (plan.chance(0.7) ? 0 : plan.int(1, 60))),
      readStallAt: plan.chance(0.2) ? plan.int(0, count) : -1,
      readStallMs: plan.int(100, 2_000),
      cancelAt: plan.chance(0.08) ? plan.int(0, count) : -1,
      // Not drawn from `plan`, so the rest of the workload is what it was before push readers existed.
      push: (seed + s) % 2 === 1,
    });
  }
  // Disruptions: cuts (with a partition after some), a peer that stops reading, a clock jump.
  let lastDisruption = 0;
  // With resume on and nothing but instant cuts, no stream may drop: the link re-dials within a few
  // hundred ms (a cut that hits a forming link grows the back-off; bursts are three cuts at most),
  // well inside a window of 1.5 s or more.
  let quiet = resume && windowMs >= 1_500;
  const nCuts = plan.int(0, 3);
  let prevCut = plan.int(20, 1_500);
  for (let c = 0; c < nCuts; c++) {
    const a = plan.int(0, n - 1);
    const b = (a + plan.int(1, n - 1)) % n;
    // Some cuts follow the last one closely: the link drops again while streams resume.
    const at = plan.chance(0.4) ? prevCut + plan.int(1, 60) : plan.int(20, 1_500);
    prevCut = at;
    const downMs = plan.chance(0.5) ? 0 : plan.int(10, Math.round(windowMs * 1.5));
    if (downMs > 0) quiet = false;
    lastDisruption = Math.max(lastDisruption, at + downMs);
    world.after(at, () => {
      note(`cut ${names[a]}-${names[b]} (${net.cut(names[a]!, names[b]!)} conns), down ${downMs} ms`);
      if (downMs > 0) {
        net.partition(names[a]!, names[b]!, true);
        world.after(downMs, () => net.partition(names[a]!, names[b]!, false));
      }
    });
  }
  if (plan.chance(0.2)) {
    const a = plan.int(0, n - 1);
    const b = (a + plan.int(1, n - 1)) % n;
    const at = plan.int(20, 1_500);
    const ms = plan.int(100, 3_000);
    quiet = false;
    lastDisruption = Math.max(lastDisruption, at + ms);
    world.after(at, () => {
      note(`${names[a]} stops reading ${names[b]} for ${ms} ms`);
      net.setReading(names[a]!, names[b]!, false);
      world.after(ms, () => net.setReading(names[a]!, names[b]!, true));
    });
  }
  if (plan.chance(0.1)) {
    // A deploy: one node drains (refuses new streams, ends what is left at its deadline).
    const d = plan.int(0, n - 1);
    const at = plan.int(20, 1_500);
    const timeout = plan.int(0, 1_500);
    quiet = false;
    lastDisruption = Math.max(lastDisruption, at + timeout);
    world.after(at, () => {
      note(`${names[d]} drains (deadline ${timeout} ms)`);
      nodes[d]!.drain({ timeout }).then(
        (sum) => note(`${names[d]} drained: ${JSON.stringify(sum)}`),
        (e: unknown) => fail(`${names[d]} drain rejected: ${typed(e)}`),
      );
    });
  }
  if (plan.chance(0.15)) {
    const at = plan.int(20, 1_500);
    const ms = plan.int(50, 8_000);
    quiet = false;
    lastDisruption = Math.max(lastDisruption, at);
    world.after(at, () => {
      note(`clock jumps ${ms} ms`);
      world.jump(ms);
    });
  }

  // A stream must end within this bound after its own last planned action and the last disruption:
  // a lost link is found by the health check (interval + timeout) or at once, re-dialled within the
  // back-off, resumed or failed within the window; a dead slot by the watchdog (3 windows); an
  // anchor nobody attached to by the unattached timeout.
  const bound = 2_000 + windowMs + 3 * (heartbeat + 200) + 2_000 + 2_000 + 5_000;

  const lives: Live[] = plans.map((p) => ({
    plan: p,
    received: 0,
    ended: false,
    endedAt: 0,
    ending: '',
    producerDone: false,
    producerOutcome: '',
    attached: false,
  }));
  const deadlines = plans.map((p) => {
    let t = p.startAt;
    for (const g of p.gaps) t += g;
    let r = p.startAt;
    for (const g of p.readGaps) r += g;
    const stalls = (p.stallAt >= 0 ? p.stallMs : 0) + (p.readStallAt >= 0 ? p.readStallMs : 0);
    return t0 + Math.max(t, r, lastDisruption) + stalls + bound;
  });
  // Each stream's receiver holds at most C + 2 records during a resume (§8.3), at most C + 1 otherwise.
  const maxHeld = plans.length * (Math.max(...credit) + 2);
  let faultArmed = fault?.kind === 'credit';
  let totalItems = 0;

  const typed = (e: unknown): string => {
    if (e instanceof LanemuxError && STABLE_CODE.test(e.code)) return e.code;
    return `untyped(${e instanceof Error ? `${e.name}: ${e.message}` : String(e)})`;
  };

  /** What a reader saw as record `k`: it must be the plan's, in order. */
  const checkRecord = (live: Live, value: string): void => {
    const p = live.plan;
    const k = live.received;
    const want = p.items[k];
    if (value !== want)
      fail(
        `stream ${p.id} (${names[p.producer]}→${names[p.consumer]}): record ${k} is ${JSON.stringify(value?.slice(0, 12))}, expected ${JSON.stringify(want?.slice(0, 12))} (duplicate, loss or reorder)`,
      );
    live.received++;
    totalItems++;
    mix(world.time);
    mix(k);
  };

  /** The reader's end, as the iterator's loop records it. */
  const readerEnded = (live: Live): void => {
    const p = live.plan;
    live.ended = true;
    live.endedAt = world.time;
    mix(world.time);
    note(
      `stream ${p.id} ${names[p.producer]}→${names[p.consumer]} ended ${live.ending} after ${live.received}/${p.items.length}`,
    );
  };

  /**
   * A push-mode reader (`consume()`): the same checks and pauses as the iterator's loop, its gaps
   * and stalls as `pause()` … `resume()`, its give-up as `cancel()` at the same record count.
   */
  const readPush = (live: Live, anchor: StreamAnchor<string>): Promise<void> =>
    new Promise<void>((resolve) => {
      const p = live.plan;
      let cancelled = false;
      // The stall and give-up checks the loop makes before reading record `received`.
      const before = (): boolean => {
        if (live.received === p.cancelAt) {
          cancelled = true;
          // A paused reader hears of its own cancel (end(null)) without a resume.
          anchor.cancel();
          return false;
        }
        return true;
      };
      const hold = (ms: number): void => {
        ctl.pause();
        void sleep(ms).then(() => {
          if (before()) ctl.resume();
        });
      };
      // After record k: its read gap, then the stall before the next one.
      const after = (k: number): void => {
        const ms = (p.readGaps[k] ?? 0) + (live.received === p.readStallAt ? p.readStallMs : 0);
        if (ms > 0) hold(ms);
        else before();
      };
      const ctl = anchor.consume({
        item: (v) => {
          const k = live.received;
          checkRecord(live, v);
          after(k);
        },
        senderError: (e) => {
          if (e.code !== 'ERR_SENDER_ERROR') {
            fail(`stream ${p.id}: senderError got ${e.code}`);
            return;
          }
          const k = live.received;
          checkRecord(live, `${ERROR_MARK}${e.message}`);
          after(k);
        },
        end: (e) => {
          if (cancelled) live.ending = 'cancelled';
          else if (e === null) {
            live.ending = 'ok';
            if (live.received !== p.items.length)
              fail(`stream ${p.id}: ended cleanly after ${live.received} of ${p.items.length} records`);
          } else {
            live.ending = typed(e);
            if (live.ending.startsWith('untyped')) fail(`stream ${p.id}: ended with an ${live.ending}`);
          }
          readerEnded(live);
          resolve();
        },
      });
      if (p.readStallAt === 0) hold(p.readStallMs);
      else before();
    });

  const runStream = async (live: Live): Promise<void> => {
    const p = live.plan;
    await sleep(p.startAt);
    const consumerNode = nodes[p.consumer]!;
    let anchor: StreamAnchor<string>;
    try {
      anchor = consumerNode.createAnchor<string>();
    } catch (e) {
      // A draining node makes no new anchor: a typed refusal, the stream never starts.
      live.ending = typed(e);
      if (live.ending.startsWith('untyped')) fail(`stream ${p.id}: createAnchor threw ${live.ending}`);
      live.ended = true;
      live.producerDone = true;
      return;
    }
    // The consumer reads with its own pauses.
    const reading = p.push
      ? readPush(live, anchor)
      : (async () => {
          const it = anchor[Symbol.asyncIterator]();
          try {
            for (;;) {
              const k = live.received;
              if (k === p.readStallAt) await sleep(p.readStallMs);
              if (k === p.cancelAt) {
                await it.return?.();
                live.ending = 'cancelled';
                break;
              }
              let r: IteratorResult<string>;
              try {
                r = await it.next();
              } catch (e) {
                if (!(e instanceof LanemuxError && e.code === 'ERR_SENDER_ERROR')) throw e;
                // The producer's SenderError, in its place among the items.
                r = { done: false, value: `${ERROR_MARK}${e.message}` };
              }
              if (r.done === true) break;
              const want = p.items[k];
              if (r.value !== want)
                fail(
                  `stream ${p.id} (${names[p.producer]}→${names[p.consumer]}): record ${k} is ${JSON.stringify(r.value?.slice(0, 12))}, expected ${JSON.stringify(want?.slice(0, 12))} (duplicate, loss or reorder)`,
                );
              live.received++;
              totalItems++;
              mix(world.time);
              mix(k);
              const g = p.readGaps[k] ?? 0;
              if (g > 0) await sleep(g);
            }
            // A consumer that gave up has nothing more to check here; one that read to the end has every record.
            if (live.ending !== 'cancelled') live.ending = 'ok';
            if (live.ending === 'ok' && live.received !== p.items.length)
              fail(`stream ${p.id}: ended cleanly after ${live.received} of ${p.items.length} records`);
          } catch (e) {
            live.ending = typed(e);
            if (live.ending.startsWith('untyped')) fail(`stream ${p.id}: ended with an ${live.ending}`);
          }
          live.ended = true;
          live.endedAt = world.time;
          mix(world.time);
          note(
            `stream ${p.id} ${names[p.producer]}→${names[p.consumer]} ended ${live.ending} after ${live.received}/${p.items.length}`,
          );
        })();
    // The producer sends with its own gaps and stalls.
    let sender: StreamSender<string> | undefined;
    try {
      sender = await nodes[p.producer]!.attachAnchor<string>(anchor.handle);
      live.attached = true;
      for (let k = 0; k < p.items.length; k++) {
        if (k === p.stallAt) await sleep(p.stallMs);
        const item = p.items[k]!;
        if (item.startsWith(ERROR_MARK)) await sender.error(item.slice(ERROR_MARK.length));
        else await sender.send(item);
        const g = p.gaps[k] ?? 0;
        if (g > 0) await sleep(g);
      }
      if (p.stallAt === p.items.length) await sleep(p.stallMs);
      await sender.finalize();
      live.producerOutcome = 'ok';
    } catch (e) {
      live.producerOutcome = typed(e);
      if (live.producerOutcome.startsWith('untyped')) fail(`stream ${p.id} producer: ${live.producerOutcome}`);
    }
    live.producerDone = true;
    await reading;
    if (quiet && live.attached && live.ending === 'ERR_SENDER_DROPPED')
      fail(
        `stream ${p.id} (${names[p.producer]}→${names[p.consumer]}) ended ERR_SENDER_DROPPED after ${live.received}/${p.items.length} though every cut link came back at once (resume window ${windowMs} ms); producer ${live.producerOutcome}`,
      );
  };

  const checkCredit = (): void => {
    const counters = nodes.map((x) => x._mux?.creditCounters());
    for (let c = 0; c < n; c++) {
      const rx = counters[c];
      if (rx === undefined) continue;
      for (const [session, acc] of rx.ingress) {
        if (acc.outstanding > acc.limit)
          fail(`session ${session}: ${acc.outstanding} unread records over its credit ${acc.limit}`);
        for (let p = 0; p < n; p++) {
          if (p === c) continue;
          const ledger = counters[p]?.egress.get(session);
          if (ledger === undefined) continue;
          if (faultArmed) {
            ledger.grant(1); // the injected fault: a credit the receiver never granted
            faultArmed = false;
          }
          // available + in flight + unread + ungranted = C, and in flight ≥ 0.
          const sum = ledger.dataAvailable + acc.outstanding + acc.ungranted;
          if (sum > acc.limit)
            fail(
              `credit not conserved on session ${session} (${names[p]}→${names[c]}): sender holds ${ledger.dataAvailable}, receiver holds ${acc.outstanding} unread and ${acc.ungranted} ungranted, over the window ${acc.limit}`,
            );
        }
      }
    }
  };

  const check = (): void => {
    checkCredit();
    if (net.inFlightBytes < 0) fail(`network accounting went negative (${net.inFlightBytes})`);
    if (net.inFlightBytes > 16 << 20) fail(`${net.inFlightBytes} bytes in flight: memory not bounded`);
    for (let i = 0; i < n; i++) {
      // The registry's fields, not metrics(): a snapshot per check would cost more than the events.
      const held = nodes[i]!.metricsRegistry.heldRecords;
      if (held > maxHeld) fail(`${names[i]} holds ${held} records, over ${maxHeld}: memory not bounded`);
    }
    for (let s = 0; s < lives.length; s++) {
      const l = lives[s]!;
      if (!l.ended && world.time > deadlines[s]!) {
        fail(
          `stream ${s} (${names[l.plan.producer]}→${names[l.plan.consumer]}) still open ${world.time - deadlines[s]! + bound} ms after its last action (bound ${bound} ms), ${l.received}/${l.plan.items.length} read, producer ${l.producerDone ? l.producerOutcome : 'busy'}`,
        );
        l.ended = true; // report once
        l.ending = 'hung';
      }
    }
  };

  const all = Promise.all(lives.map((l) => runStream(l)));
  let done = false;
  all.then(() => (done = true));
  const hardStop = Math.max(...deadlines) + 1;
  let k = 0;
  await Promise.resolve();
  while (!done && failures.length === 0) {
    if (!(await world.step(hardStop))) break;
    options.observe?.(world.time, nodes);
    if (++k % checkEvery === 0) check();
  }
  check();
  if (!done && failures.length === 0) fail('the workload did not finish (no events left)');

  // Quiescence: once every stream ended (and resume rings are past their window), nothing is live.
  if (failures.length === 0) {
    const settleUntil = world.time + 3 * (heartbeat + 200) + 1_000;
    while (await world.step(settleUntil)) {}
    world.time = Math.max(world.time, settleUntil);
    check();
    for (let i = 0; i < n; i++) {
      // The registry's fields (what metrics() reports under these names), not a whole snapshot.
      const m = nodes[i]!.metricsRegistry;
      const gauges: Array<[string, number]> = [
        ['velo_streaming_mux_live_slots', m.liveSlots],
        ['velo_streaming_mux_held_records', m.heldRecords],
        ['velo_streaming_mux_withheld_records', m.withheldRecords],
        ['velo_streaming_mux_staged_records', m.stagedRecords],
        ['velo_streaming_active_anchors', m.activeAnchors],
      ];
      for (const [key, v] of gauges) if (v !== 0) fail(`${names[i]}: ${key} is ${v} after every stream ended`);
      const c = nodes[i]!._mux?.creditCounters();
      if (c !== undefined && (c.egress.size > 0 || c.ingress.size > 0 || c.bindsBusy))
        fail(
          `${names[i]}: ${c.egress.size} egress and ${c.ingress.size} ingress slots, binds busy ${c.bindsBusy}, after every stream ended`,
        );
    }
  }
  const closing = nodes.map((x, i) => ({ done: false, name: names[i], p: x.close() }));
  for (const c of closing) c.p.then(() => (c.done = true));
  const closed = await drive(Promise.all(closing.map((c) => c.p)), 30_000);
  if (!closed)
    fail(
      `closing ${closing
        .filter((c) => !c.done)
        .map((c) => c.name)
        .join(', ')} did not finish within 30 s of virtual time`,
    );
  else if (net.openConns !== 0) fail(`${net.openConns} connections still open after every node closed`);

  const endings: Record<string, number> = {};
  for (const l of lives) endings[l.ending || 'none'] = (endings[l.ending || 'none'] ?? 0) + 1;
  mix(world.events);
  return {
    seed,
    ok: failures.length === 0,
    failures,
    trace,
    events: world.events,
    virtualMs: world.time,
    nodes: n,
    streams: lives.length,
    items: totalItems,
    endings,
    counts: {
      macrotasks: world.macrotasks,
      timers: world.timersFired,
      frames: net.frames,
      wireBytes: net.bytes,
      peakInFlight: net.peakInFlightBytes,
      resumed: nodes.reduce((a, x) => a + x.metricsRegistry.resumedStreams, 0),
    },
    fingerprint: hash.toString(16).padStart(8, '0'),
  };
}

/** One seed's verdict as text: the failures, then how to replay it. */
export function describe(r: SimReport): string {
  const head = `seed ${r.seed}: ${r.ok ? 'ok' : 'FAIL'} — ${r.nodes} nodes, ${r.streams} streams, ${r.items} records, ${r.events} events, ${Math.round(r.virtualMs)} virtual ms, endings ${JSON.stringify(r.endings)}, fingerprint ${r.fingerprint}`;
  if (r.ok) return head;
  return [head, ...r.failures.map((f) => `  ${f}`), `  replay: ${replayCommand(r.seed)}`].join('\n');
}

/** The event summary of a replay. */
export function summary(r: SimReport): string {
  const c = r.counts;
  return `events: ${c.macrotasks} macrotasks, ${c.timers} timers; wire: ${c.frames} frames, ${c.wireBytes} bytes, at most ${c.peakInFlight} in flight; ${c.resumed} streams resumed`;
}
