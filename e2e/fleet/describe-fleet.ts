/**
 * The fleet suite, once per discovery store: a real store (etcd or nats-server), two engine
 * processes, two frontend processes relaying to their consumers (`openRelay`), Node consumer
 * processes over TCP and one Chromium page per frontend over WebSocket. Each process answers JSON
 * lines on stdin/stdout (control.ts); every wait is on an event or a polled state, none on time
 * except the lease expiry the scenario is about.
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Discovery, DiscoveryWatch } from '../../src/discovery/discovery.ts';
import { type DiscoveryHarness, TTL_MS, until } from '../../test/discovery/conformance.ts';
import { drive, type E2eEnv, startE2e } from '../support/harness.ts';
import { bundleFleetNode, FleetChild } from './control.ts';

/**
 * The frontends' terms as consumers of the engines' streams: credit C, the byte budget an engine
 * withholds per stream beyond it (then its `send()` waits), heartbeats.
 */
const FRONTEND_MUX = {
  initialCredit: 32,
  slotByteBudget: 4096,
  heartbeatInterval: 500,
  detectionMultiplier: 3,
} as const;
/** The watchdog bound of a frontend: a silent engine's streams are dropped within it. */
const WATCHDOG_MS = FRONTEND_MUX.heartbeatInterval * FRONTEND_MUX.detectionMultiplier;

interface ConsumedStream {
  prompt: string;
  tokens: number;
  ordered: boolean;
  end: string | null;
  retryable: boolean | null;
}
interface RelayInfo {
  prompt: string;
  engine: string | null;
  held: number;
  maxHeld: number;
  relayed: number;
  creditLimit: number;
  end: string | null;
}
interface ServedInfo {
  prompt: string;
  accepted: number;
  waiting: boolean;
  outcome: string;
  sendErrorCode: string | null;
  cancelReason: string | null;
}

/** Poll an async state until `ok` holds (the children's state has no event of its own). */
async function poll<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function describeFleet(name: string, setup: () => Promise<DiscoveryHarness>): void {
  describe(`fleet over ${name}: engines, relaying frontends, Node consumers and pages`, () => {
    let h: DiscoveryHarness;
    let e2e: E2eEnv;
    let watch: DiscoveryWatch;
    let watcher: Discovery;
    const children: FleetChild[] = [];
    let engines: FleetChild[];
    let frontends: FleetChild[];
    let consumers: FleetChild[];
    let pages: Page[];
    const ids = new Map<FleetChild, string>();
    let started = 0;
    let entry: string;
    let childConfig: Record<string, unknown>;

    const spawn = async (role: string, extra: Record<string, unknown> = {}): Promise<FleetChild> => {
      const c = new FleetChild(entry, role, { ...childConfig, ...extra });
      children.push(c);
      const ready = await Promise.race([
        c.ready,
        c.exited.then(() => {
          throw new Error(`${role} exited before it was ready`);
        }),
      ]);
      ids.set(c, ready.workerId);
      return c;
    };
    const consumerOf = (frontend: FleetChild) =>
      frontend.ready.then((r) => spawn('consumer', { frontend: r.address, mux: { initialCredit: 32 } }));

    beforeAll(async () => {
      started = Date.now();
      const [harness, bundled, env] = await Promise.all([setup(), bundleFleetNode(), startE2e()]);
      const phases = [`store, bundle, browser ${Date.now() - started} ms`];
      h = harness;
      entry = bundled;
      e2e = env;
      const space = await h.space();
      childConfig = { store: name, discovery: space.childOptions };
      watcher = space.create();
      watch = watcher.watch();
      await until(watch, (e) => e.type === 'synced');
      let t = Date.now();
      // All four at once (a child's start is mostly loading the store client): a frontend's watch
      // sees the engines whenever they register.
      [engines, frontends] = await Promise.all([
        Promise.all([spawn('engine'), spawn('engine')]),
        Promise.all([spawn('frontend', { mux: FRONTEND_MUX }), spawn('frontend', { mux: FRONTEND_MUX })]),
      ]);
      phases.push(`engines and frontends ${Date.now() - t} ms`);
      t = Date.now();
      // Each frontend's watch has both engines before anything is asked of it.
      await Promise.all(
        frontends.map((f) =>
          poll(
            () => f.call<string[]>('engines'),
            (e) => e.length === 2,
            'two engines',
          ),
        ),
      );
      consumers = await Promise.all(frontends.map(consumerOf));
      phases.push(`consumers ${Date.now() - t} ms`);
      t = Date.now();
      pages = [];
      for (const f of frontends) {
        const page = await e2e.openPage();
        const { ws } = await f.ready;
        await drive(page, 'connect', { url: ws!, kind: 'ws', mux: { initialCredit: 32 } });
        pages.push(page);
      }
      phases.push(`pages ${Date.now() - t} ms`);
      console.log(`[fleet ${name}] fleet up in ${Date.now() - started} ms (${phases.join(', ')})`);
    }, 90_000);

    afterAll(async () => {
      await Promise.all(children.map((c) => c.end()));
      watch?.close();
      await watcher?.close();
      await e2e?.close();
      await h?.close();
      if (entry !== undefined) rmSync(dirname(entry), { recursive: true, force: true });
      console.log(`[fleet ${name}] wall ${Date.now() - started} ms`);
    }, 30_000);

    const relaysOf = (f: FleetChild) => f.call<RelayInfo[]>('relays');
    const streamsOf = (c: FleetChild) => c.call<ConsumedStream[]>('streams');
    const allRelays = async () => (await Promise.all(frontends.map(relaysOf))).flat();

    it('streams from Node consumers and pages flow end to end through both frontends to both engines', async () => {
      const t0 = Date.now();
      const N = 200;
      await Promise.all(
        consumers.map((c, i) => c.call('generate', { prefix: `flow${i}-`, count: 8, n: N, delayMs: 0, read: true })),
      );
      const summaries = await Promise.all(
        pages.map((p, i) => drive(p, 'generateMany', 8, { prompt: `pflow${i}-`, n: N, render: false })),
      );
      for (const s of summaries) {
        expect(s.allFinalized, JSON.stringify(s.badStreams)).toBe(true);
        expect(s.allOrdered).toBe(true);
        expect(s.tokens).toBe(8 * N);
      }
      for (const c of consumers) {
        const got = await poll(
          () => streamsOf(c),
          (s) => s.filter((x) => x.prompt.startsWith('flow')).every((x) => x.end !== null),
          'consumer streams to end',
        );
        for (const s of got) expect(s).toMatchObject({ tokens: N, ordered: true, end: 'finalized' });
      }
      const relays = await allRelays();
      expect(relays).toHaveLength(32);
      expect(relays.every((r) => r.end === 'finalized' && r.relayed === N)).toBe(true);
      // Round robin: both engines served both frontends.
      expect(new Set(relays.map((r) => r.engine))).toEqual(new Set(engines.map((e) => ids.get(e))));
      console.log(
        `[fleet ${name}] 32 streams × ${N} tokens through the relay in ${Date.now() - t0} ms; pages ${summaries.map((s) => `${Math.round(s.tokensPerSecond)} tok/s, ttft p50 ${s.ttftP50Ms} ms`).join('; ')}`,
      );
    });

    it('a stalled consumer holds only its own streams at the engine, within C + 1 records each at the frontend, while another consumer streams at full rate', async () => {
      const [f] = frontends;
      const stalled = await consumerOf(f!);
      const STALLED = 4;
      const STALLED_N = 5000;
      const prompts = await stalled.call<string[]>('generate', {
        prefix: 'stall-',
        count: STALLED,
        n: STALLED_N,
        delayMs: 0,
        read: false,
      });
      const page = pages[0]!;
      const pagePrompt = await drive(page, 'generate', { prompt: 'pstall', n: STALLED_N, read: false, render: false });
      const stalledSet = new Set([...prompts, 'pstall']);
      // Each stalled stream's producer parks in send() once the credit ahead of it is spent.
      const parked = () =>
        Promise.all(engines.map((e) => e.call<ServedInfo[]>('served'))).then((l) =>
          l.flat().filter((s) => stalledSet.has(s.prompt)),
        );
      await poll(parked, (s) => s.length === stalledSet.size && s.every((x) => x.waiting), 'stalled producers parked');
      const t0 = Date.now();
      const N = 2000;
      await consumers[0]!.call('generate', { prefix: 'full-', count: 8, n: N, delayMs: 0, read: true });
      const full = await poll(
        () => streamsOf(consumers[0]!),
        (s) => s.filter((x) => x.prompt.startsWith('full-')).every((x) => x.end !== null),
        'the reading consumer to finish',
      );
      const fullMs = Date.now() - t0;
      for (const s of full.filter((x) => x.prompt.startsWith('full-')))
        expect(s).toMatchObject({ tokens: N, ordered: true, end: 'finalized' });
      // Still parked: nothing of the stalled streams moved while the other consumer streamed.
      const after = await parked();
      expect(after.every((x) => x.waiting && x.outcome === 'streaming' && x.accepted < STALLED_N)).toBe(true);
      const held = (await relaysOf(f!)).filter((r) => stalledSet.has(r.prompt));
      expect(held).toHaveLength(stalledSet.size);
      // The documented bound: at most C + 1 records per relayed stream (C = the source's credit window).
      const RECORD = new TextEncoder().encode('stall-3:4999 ').length;
      const bound = stalledSet.size * (FRONTEND_MUX.initialCredit + 1) * RECORD;
      const maxHeld = held.reduce((s, r) => s + r.maxHeld, 0);
      for (const r of held) expect(r.maxHeld).toBeLessThanOrEqual(r.creditLimit + 1);
      expect(maxHeld * RECORD).toBeLessThanOrEqual(bound);
      console.log(
        `[fleet ${name}] stalled: ${stalledSet.size} streams hold ≤ ${Math.max(...held.map((r) => r.maxHeld))} records each at the frontend (bound C + 1 = ${FRONTEND_MUX.initialCredit + 1}), ${maxHeld * RECORD} B in all (bound ${bound} B); engine accepted ${after.map((x) => x.accepted).join('/')} of ${STALLED_N} each; the reading consumer got 8 × ${N} tokens in ${fullMs} ms (${Math.round((8 * N * 1000) / fullMs)} tok/s)`,
      );
      await stalled.call('cancelAll');
      await drive(page, 'cancel', pagePrompt);
      await poll(
        () => relaysOf(f!),
        (rs) => rs.filter((r) => stalledSet.has(r.prompt)).every((r) => r.end !== null),
        'stalled relays to end',
      );
      await stalled.end();
    });

    it('SIGKILL of an engine mid-stream: its streams end retryable within the watchdog bound, its lease expires, new requests reach the live engine, nothing hangs', async () => {
      const N = 1500;
      await Promise.all(
        consumers.map((c, i) => c.call('generate', { prefix: `kill${i}-`, count: 6, n: N, delayMs: 2, read: true })),
      );
      const pageIds = await Promise.all(
        pages.map((p, i) =>
          Promise.all(
            [0, 1, 2, 3].map((k) =>
              drive(p, 'generate', { prompt: `pkill${i}-${k}`, n: N, delayMs: 2, render: false }),
            ),
          ),
        ),
      );
      const killing = (await allRelays()).filter((r) => r.prompt.includes('kill'));
      // Both engines carry some of them, and every stream is under way.
      await poll(
        allRelays,
        (rs) => rs.filter((r) => r.prompt.includes('kill')).every((r) => r.relayed >= 10),
        'every stream under way',
      );
      const [victim, survivor] = engines as [FleetChild, FleetChild];
      const victimId = ids.get(victim)!;
      const survivorId = ids.get(survivor)!;
      const onVictim = new Set(killing.filter((r) => r.engine === victimId).map((r) => r.prompt));
      expect(onVictim.size).toBeGreaterThan(0);
      expect(onVictim.size).toBeLessThan(killing.length);
      const killedAt = Date.now();
      await victim.kill();
      // Node consumers: the victim's streams end ERR_SENDER_DROPPED (retryable), the others finish.
      const ended = await Promise.all(
        consumers.map((c) =>
          poll(
            () => streamsOf(c),
            (s) => s.filter((x) => onVictim.has(x.prompt)).every((x) => x.end !== null),
            "the victim's streams to end",
          ),
        ),
      );
      const endMs = Date.now() - killedAt;
      expect(endMs).toBeLessThanOrEqual(WATCHDOG_MS);
      for (const s of ended.flat().filter((x) => onVictim.has(x.prompt))) {
        expect(s.end).toBe('ERR_SENDER_DROPPED');
        expect(s.retryable).toBe(true);
        expect(s.ordered).toBe(true);
        expect(s.tokens).toBeLessThan(N);
      }
      // New requests right away (the victim's record still lives): they reach the survivor.
      const t1 = Date.now();
      await consumers[0]!.call('generate', { prefix: 'after-kill-', count: 4, n: 50, delayMs: 0, read: true });
      const newReqMs = Date.now() - t1;
      // Pages: the same ends.
      for (let i = 0; i < pages.length; i++)
        for (const [k, id] of pageIds[i]!.entries()) {
          const r = await drive(pages[i]!, 'waitEnd', id);
          if (onVictim.has(`pkill${i}-${k}`)) {
            expect(r.end).toBe('error');
            expect(r.error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
            expect(r.orderOk).toBe(true);
          } else {
            expect(r.end).toBe('finalized');
            expect(r.tokens).toHaveLength(N);
          }
        }
      for (const s of (await Promise.all(consumers.map(streamsOf))).flat().filter((x) => x.prompt.startsWith('kill')))
        if (!onVictim.has(s.prompt)) expect(s).toMatchObject({ end: 'finalized', tokens: N, ordered: true });
      // The lease expires: the store drops the victim's record after its TTL; both stores take seconds more
      // on this machine (up to 10 s seen), hence the generous wait.
      await until(
        watch,
        (e) => e.type === 'delete' && e.workerId.toString(16).padStart(16, '0') === victimId,
        10 * TTL_MS,
      );
      const leaseMs = Date.now() - killedAt;
      await Promise.all(
        frontends.map((f) =>
          poll(
            () => f.call<string[]>('engines'),
            (e) => e.length === 1 && e[0] === survivorId,
            'one engine',
          ),
        ),
      );
      await Promise.all(
        consumers.map((c, i) => c.call('generate', { prefix: `late${i}-`, count: 4, n: 50, delayMs: 0, read: true })),
      );
      const late = await Promise.all(
        consumers.map((c) =>
          poll(
            () => streamsOf(c),
            (s) => s.filter((x) => /^(late|after-kill)/.test(x.prompt)).every((x) => x.end !== null),
            'new requests to end',
          ),
        ),
      );
      for (const s of late.flat().filter((x) => /^(late|after-kill)/.test(x.prompt)))
        expect(s).toMatchObject({ end: 'finalized', tokens: 50, ordered: true });
      const newRelays = (await allRelays()).filter((r) => /^(late|after-kill)/.test(r.prompt));
      expect(newRelays).toHaveLength(12);
      expect(newRelays.every((r) => r.engine === survivorId)).toBe(true);
      console.log(
        `[fleet ${name}] SIGKILL: ${onVictim.size} of ${killing.length} streams on the killed engine ended ERR_SENDER_DROPPED in ${endMs} ms (watchdog bound ${WATCHDOG_MS} ms); a new request reached the live engine in ${newReqMs} ms; lease gone after ${leaseMs} ms (TTL ${TTL_MS} ms)`,
      );
    }, 60_000);

    it("a page that goes away cancels its relayed streams up to the engine; a killed frontend ends its consumers' streams retryable and frees the engine's senders", async () => {
      const survivor = engines[1]!;
      const served = () => survivor.call<ServedInfo[]>('served');
      const LONG = 100_000;
      // Browser gone: a third page on frontend 0 closes mid-stream.
      const gonePage = await e2e.openPage();
      await drive(gonePage, 'connect', {
        url: (await frontends[0]!.ready).ws!,
        kind: 'ws',
        mux: { initialCredit: 32 },
      });
      for (const k of [0, 1, 2])
        await drive(gonePage, 'generate', { prompt: `gone-${k}`, n: LONG, delayMs: 2, render: false });
      const underWay = (prefix: string) =>
        poll(
          allRelays,
          (rs) => {
            const mine = rs.filter((r) => r.prompt.startsWith(prefix));
            return mine.length > 0 && mine.every((r) => r.relayed >= 10);
          },
          `${prefix} streams under way`,
        );
      await underWay('gone-');
      const closedAt = Date.now();
      await gonePage.close();
      const goneServed = await poll(
        served,
        (l) => l.filter((s) => s.prompt.startsWith('gone-')).every((s) => s.outcome !== 'streaming'),
        "the engine's senders of the closed page",
      );
      const goneMs = Date.now() - closedAt;
      const goneRelays = (await relaysOf(frontends[0]!)).filter((r) => r.prompt.startsWith('gone-'));
      for (const s of goneServed.filter((x) => x.prompt.startsWith('gone-'))) {
        expect(s.cancelReason).not.toBeNull();
        expect(s.accepted).toBeLessThan(LONG);
      }
      expect(goneRelays.every((r) => r.end !== null && r.end !== 'finalized')).toBe(true);

      // Frontend killed: its Node consumer's and its page's streams end retryable; the engine's senders fail.
      const [, victim] = frontends as [FleetChild, FleetChild];
      await consumers[1]!.call('generate', { prefix: 'fkill-', count: 4, n: LONG, delayMs: 2, read: true });
      const pageFkill = await Promise.all(
        [0, 1].map((k) => drive(pages[1]!, 'generate', { prompt: `pfkill-${k}`, n: LONG, delayMs: 2, render: false })),
      );
      await underWay('fkill-');
      const killedAt = Date.now();
      await victim.kill();
      const ends = (
        await poll(
          () => streamsOf(consumers[1]!),
          (l) => l.filter((s) => s.prompt.startsWith('fkill-')).every((s) => s.end !== null),
          "the killed frontend's consumer streams to end",
        )
      ).filter((s) => s.prompt.startsWith('fkill-'));
      const consumerMs = Date.now() - killedAt;
      for (const s of ends) expect(s).toMatchObject({ end: 'ERR_SENDER_DROPPED', retryable: true, ordered: true });
      for (const id of pageFkill) {
        const r = await drive(pages[1]!, 'waitEnd', id);
        expect(r.end).toBe('error');
        expect(r.error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
        expect(r.orderOk).toBe(true);
      }
      const engineEnds = (
        await poll(
          served,
          (l) => l.filter((s) => /^p?fkill-/.test(s.prompt)).every((s) => s.outcome !== 'streaming'),
          "the engine's senders toward the killed frontend",
        )
      ).filter((s) => /^p?fkill-/.test(s.prompt));
      const engineMs = Date.now() - killedAt;
      expect(engineEnds).toHaveLength(6);
      for (const s of engineEnds) expect(s.outcome).toBe('error');
      // The live frontend still serves.
      await consumers[0]!.call('generate', { prefix: 'post-', count: 2, n: 50, delayMs: 0, read: true });
      const post = await poll(
        () => streamsOf(consumers[0]!),
        (l) => l.filter((s) => s.prompt.startsWith('post-')).every((s) => s.end !== null),
        'requests after the frontend kill',
      );
      for (const s of post.filter((x) => x.prompt.startsWith('post-')))
        expect(s).toMatchObject({ end: 'finalized', tokens: 50, ordered: true });
      console.log(
        `[fleet ${name}] page closed: the engine's 3 senders cancelled in ${goneMs} ms (cancel reason ${[...new Set(goneServed.filter((x) => x.prompt.startsWith('gone-')).map((x) => x.cancelReason))].join('/')}; relay end ${[...new Set(goneRelays.map((r) => r.end))].join('/')}); frontend SIGKILL: 6 consumer streams ended ERR_SENDER_DROPPED in ${consumerMs} ms, the engine's senders failed (${[...new Set(engineEnds.map((x) => `${x.sendErrorCode}/${x.cancelReason}`))].join(', ')}) by ${engineMs} ms`,
      );
    }, 60_000);

    it('with the store stopped, relayed streams and new requests over existing links go on', async () => {
      const [f] = frontends as [FleetChild];
      await h.stop!();
      try {
        const N = 200;
        await consumers[0]!.call('generate', { prefix: 'outage-', count: 4, n: N, delayMs: 0, read: true });
        const s = await drive(pages[0]!, 'generateMany', 2, { prompt: 'poutage-', n: N, render: false });
        expect(s.allFinalized, JSON.stringify(s.badStreams)).toBe(true);
        expect(s.allOrdered).toBe(true);
        const got = await poll(
          () => streamsOf(consumers[0]!),
          (l) => l.filter((x) => x.prompt.startsWith('outage-')).every((x) => x.end !== null),
          'streams during the outage',
        );
        for (const x of got.filter((y) => y.prompt.startsWith('outage-')))
          expect(x).toMatchObject({ end: 'finalized', tokens: N, ordered: true });
        expect((await relaysOf(f)).filter((r) => /^p?outage-/.test(r.prompt)).every((r) => r.end === 'finalized')).toBe(
          true,
        );
      } finally {
        await h.start!();
      }
    });

    it('live slots return to 0 on every node', async () => {
      const live = (c: FleetChild) => (c.proc.exitCode === null && c.proc.signalCode === null ? c.liveSlots() : 0);
      for (const c of children)
        await poll(
          () => Promise.resolve(live(c)),
          (n) => n === 0,
          `${c.role} live slots`,
        );
      for (const p of pages) {
        const m = await drive(p, 'metrics');
        expect(Object.entries(m).filter(([k, v]) => k.endsWith('live_slots') && v !== 0)).toEqual([]);
      }
      expect(e2e.pageErrors).toEqual([]);
    });
  });
}
