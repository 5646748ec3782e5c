#!/usr/bin/env node
// The decode shape with both nodes in this one process over the in-memory transport: X streams of
// 64-byte tokens, one token per stream per pass, W passes in flight, the consumer reading in push
// mode. No sockets, no kernel, no second process: the CPU per token is lanemux's own JavaScript on
// both sides (staging, batching, decoding, delivery, credit), so a change to it shows with far less
// noise than in the two-process bench. Pair two builds with LANEMUX_DIST, alternating the order:
//   for i in 1 2 3 4; do for d in <before>/dist dist; do LANEMUX_DIST=$d node bench/inproc.mjs; done; done
// Usage (after `npm run build`): node bench/inproc.mjs [--slots 1024] [--peers 1] [--window 8] [--passes 3000] [--warm 1000]
//   [--peers Y] (Y consumer nodes, stream s on node s % Y: the per-batch costs show at X / Y records a batch)
//   [--token-bytes 64] (byte items above 64 B leave V8's on-heap typed arrays: the receiver's copy shows)
//   [--resume on|off] [--fresh] [--item bytes|object|string] (object: an AI SDK text-delta chunk `{ type, id, delta }` with a `token-bytes`-long delta)
//   [--virtual-clock] (both nodes on a clock that moves 0.1 ms a pass, and to the next timer when nothing
//   else is left to run, with seeded randomness: a run does the same work however fast the machine
//   is, as bench/instr.mjs needs to count its instructions)
import { TOKEN, cpuUs, dist, parseArgs, round } from './harness.mjs';

const args = parseArgs();
const slots = Number(args.slots ?? 1024);
const window = Number(args.window ?? 8);
const peers = Number(args.peers ?? 1);
const passes = Number(args.passes ?? 3000);
const warm = Number(args.warm ?? 1000);
const tokenBytes = Number(args['token-bytes'] ?? TOKEN);
const item = args.item ?? 'bytes';
const resume = (args.resume ?? 'on') !== 'off';
const virtual = args['virtual-clock'] === 'true';
const clock = virtual ? virtualClock() : null;
const opts = { ...(resume ? {} : { resume: false }), ...(clock === null ? {} : { runtime: clock.runtime }) };
// --fresh: a new item per token, as an engine makes them (the default reuses W + 1 sets, which
// leaves the garbage collector nothing young to keep alive).
const fresh = args.fresh === 'true';
const make = (s) =>
  item === 'object'
    ? { type: 'text-delta', id: `s${s}`, delta: 'a'.repeat(tokenBytes) }
    : item === 'string'
      ? `${s}`.padEnd(tokenBytes, 'a')
      : new Uint8Array(tokenBytes).fill(0x61);
const { createNode } = await dist('index.js');
const { createMemoryNetwork, memoryTransport } = await dist('adapters/memory.js');
const network = createMemoryNetwork();
const consumers = [];
for (let y = 0; y < peers; y++)
  consumers.push(await createNode({ transports: [memoryTransport({ network, name: `consumer${y}` })], ...opts }));
const producer = await createNode({ transports: [memoryTransport({ network })], ...opts });
for (let y = 0; y < peers; y++) await producer.connect(`memory://consumer${y}`);
// Stream s on consumer s % Y, as in mux-bench: every pass is one batch per peer of X / Y records.
const anchors = Array.from({ length: slots }, (_, s) => consumers[s % peers].createAnchor());
// Tokens read so far, and the pass whose completion the sender waits for.
let read = 0;
let waitFor = Number.POSITIVE_INFINITY;
let wake = () => {};
for (const a of anchors) {
  a.consume({
    item: () => {
      if (++read >= waitFor) wake();
    },
  });
}
const senders = [];
for (let i = 0; i < slots; i += 64)
  senders.push(...(await Promise.all(anchors.slice(i, i + 64).map((a) => producer.attachAnchor(a.handle)))));
// W + 1 sets of tokens: a set is reused once the window guarantees its pass was read.
const sets = Array.from({ length: window + 1 }, () => Array.from({ length: slots }, (_, s) => make(s)));
const readUpTo = (n) =>
  read >= n
    ? undefined
    : clock !== null
      ? clock.until(() => read >= n)
      : new Promise((resolve) => {
          waitFor = n;
          wake = () => {
            waitFor = Number.POSITIVE_INFINITY;
            resolve();
          };
        });
let cpu0 = null;
let t0 = 0;
for (let p = 0; p < warm + passes; p++) {
  if (p === warm) {
    await readUpTo(warm * slots);
    cpu0 = process.cpuUsage();
    t0 = performance.now();
  }
  if (clock !== null) clock.step(0.1);
  const set = sets[p % sets.length];
  if (fresh) for (let s = 0; s < slots; s++) senders[s].send(make(s));
  else for (let s = 0; s < slots; s++) senders[s].send(set[s]);
  // At most W passes unread: wait for pass p − W + 1 before staging pass p + 1.
  await readUpTo((p + 2 - window) * slots);
}
await readUpTo((warm + passes) * slots);
const cpu = cpuUs(process.cpuUsage(cpu0));
const wall = performance.now() - t0;
const tokens = passes * slots;
console.log(
  JSON.stringify({
    bench: 'inproc',
    slots,
    peers,
    window,
    passes,
    item,
    resume,
    fresh,
    virtual_clock: virtual,
    token_bytes: tokenBytes,
    cpu_ns_per_token: round((cpu * 1000) / tokens, 1),
    tokens_per_s: Math.round((tokens / wall) * 1000),
  }),
);
process.exit(0);

/**
 * A Runtime whose clock moves only when told: `step(ms)` per pass, and `until(cond)` runs the nodes'
 * macrotasks and, when none is left, jumps to the next timer (a reply's linger, a PING's spacing).
 * Macrotasks are real `setImmediate`s, so the event loop's order is kept; randomness is seeded.
 */
function virtualClock() {
  let now = 0;
  let pending = 0;
  let nextId = 1;
  let seed = 0x2545f491;
  const timers = new Map();
  const fire = (upTo) => {
    for (;;) {
      let due = null;
      for (const t of timers.values())
        if (t.at <= upTo && (due === null || t.at < due.at || (t.at === due.at && t.id < due.id))) due = t;
      if (due === null) return;
      timers.delete(due.id);
      if (due.at > now) now = due.at;
      due.fn();
    }
  };
  const runtime = {
    now: () => now,
    setTimer(fn, ms) {
      const t = { id: nextId++, at: now + Math.max(0, ms), fn };
      timers.set(t.id, t);
      return t.id;
    },
    clearTimer: (id) => timers.delete(id),
    macrotask(fn) {
      pending++;
      setImmediate(() => {
        pending--;
        fn();
      });
    },
    randomBytes(out) {
      for (let i = 0; i < out.length; i++) {
        seed ^= seed << 13;
        seed ^= seed >>> 17;
        seed ^= seed << 5;
        out[i] = seed & 0xff;
      }
    },
    env: (name) => process.env[name],
  };
  return {
    runtime,
    step(ms) {
      fire(now + ms);
      now += ms;
    },
    async until(cond) {
      for (let idle = 0; !cond(); ) {
        await new Promise((r) => setImmediate(r));
        if (pending > 0) continue;
        let next = null;
        for (const t of timers.values()) if (next === null || t.at < next) next = t.at;
        if (next !== null) fire(next);
        else if (++idle > 1000) throw new Error('virtual clock: nothing left to run and the bench still waits');
      }
    },
  };
}
