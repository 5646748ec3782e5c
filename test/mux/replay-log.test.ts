// The lane's replay log (docs/protocol.md §8.3): the records of resumable streams staged on a lane,
// in staging order, kept until a PING behind their batch is answered and handed back, per stream and
// oldest first, when the link is lost. Pure: driven here directly.
import { describe, expect, it } from 'vitest';
import { nextReplayRound, ReplayLog, type ReplayOwner } from '../../src/mux/replay-log.ts';
import { ReplayBudget } from '../../src/stream/replay-ring.ts';
import { giveBuffer, keptBuffers, takeBuffer } from '../../src/mux/replay-chunks.ts';

const text = new TextEncoder();
const bytesOf = (s: string): Uint8Array => text.encode(s);

/** Append `body` as one record, from a buffer of its own sealed at once (its bytes copied into the log). */
function put(log: ReplayLog, o: ReplayOwner, kind: number, body: string): void {
  const buf = bytesOf(body);
  log.append(o, kind, buf, 0, buf.byteLength);
  log.seal(buf, buf.byteLength);
}

/** An owner that records what it is handed back. */
function owner(): ReplayOwner & { got: unknown[]; done: boolean[] } {
  return {
    replayRound: 0,
    got: [],
    done: [],
    recover(kind, payload) {
      this.got.push(`${kind}:${new TextDecoder().decode(payload as Uint8Array)}`);
    },
    recovered(live) {
      this.done.push(live);
    },
  };
}

const OVERHEAD = 16;

describe('replay log', () => {
  it('hands each stream its own records back in staging order, across growth and wrap-around, and reaches each once', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const b = owner();
    // Wrap the array: confirm the front while appending past its first size.
    for (let i = 0; i < 200; i++) put(log, i % 2 === 0 ? a : b, 0, `x${i}`);
    log.confirm(150);
    for (let i = 200; i < 700; i++) put(log, i % 2 === 0 ? a : b, 1, `x${i}`);
    expect(log.length).toBe(550);
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(reached).toEqual([a, b]);
    const expected = (parity: number) =>
      Array.from({ length: 700 - 150 }, (_, k) => 150 + k)
        .filter((i) => i % 2 === parity)
        .map((i) => `${i < 200 ? 0 : 1}:x${i}`);
    expect(a.got).toEqual(expected(0));
    expect(b.got).toEqual(expected(1));
    expect(log.length).toBe(0);
    expect(budget.used).toBe(0);
  });

  it('a confirmation drops every record before its mark and gives their bytes back to the node budget', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    for (let i = 0; i < 10; i++) put(log, a, 1, `${i}`.padStart(4, '0'));
    expect(budget.used).toBe(10 * (4 + OVERHEAD));
    const mark = log.appended;
    for (let i = 10; i < 13; i++) put(log, a, 1, `${i}`.padStart(4, '0'));
    log.confirm(mark);
    expect(log.length).toBe(3);
    expect(log.first).toBe(10);
    expect(budget.used).toBe(3 * (4 + OVERHEAD));
    // An older mark confirms nothing more.
    log.confirm(5);
    expect(log.length).toBe(3);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(['1:0010', '1:0011', '1:0012']);
  });

  it('over the node budget, finished streams go first, then the oldest records; the newest is always kept', () => {
    const budget = new ReplayBudget(5 * (10 + OVERHEAD));
    let finished = 2 * (10 + OVERHEAD);
    budget.used = finished;
    budget.evict = () => {
      if (finished === 0) return false;
      budget.used -= 10 + OVERHEAD;
      finished -= 10 + OVERHEAD;
      return true;
    };
    const log = new ReplayLog(budget);
    const a = owner();
    for (let i = 0; i < 7; i++) put(log, a, 0, `${i}`.repeat(10));
    expect(finished).toBe(0);
    expect(log.length).toBe(5);
    expect(budget.used).toBe(5 * (10 + OVERHEAD));
    // A record larger than the whole budget empties the log and is still kept.
    put(log, a, 0, 'b'.repeat(1000));
    expect(log.length).toBe(1);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual([`0:${'b'.repeat(1000)}`]);
    expect(budget.used).toBe(0);
  });

  it('one stream leaving the log takes its records back and leaves the others in place, charged once', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const b = owner();
    for (let i = 0; i < 6; i++) put(log, i < 3 ? a : b, 2, `${i}`.repeat(4));
    put(log, a, 2, '6666');
    log.handOutOne(a);
    expect(a.got).toEqual(['2:0000', '2:1111', '2:2222', '2:6666']);
    expect(budget.used).toBe(3 * (4 + OVERHEAD));
    // Its emptied entries are confirmed with the rest without being charged back twice.
    log.confirm(log.appended - 1);
    expect(budget.used).toBe(0);
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(reached).toEqual([]);
    expect(b.got).toEqual([]);
  });

  it('records of a batch are read in place until it is written, then copied out: the writer may reuse its buffer', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    // A small batch in a large buffer: not worth keeping.
    const buf = new Uint8Array(4096);
    buf.set(bytesOf('hello'), 16);
    buf.set(bytesOf('world'), 40);
    log.append(a, 1, buf, 16, 21);
    log.append(a, 1, buf, 40, 45);
    expect(log.seal(buf, 64)).toBe(false);
    buf.fill(0x78);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(['1:hello', '1:world']);
  });

  it("a batch that fills its buffer with the log's records keeps the buffer, which is recycled only once confirmed", () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    const size = 32_768;
    const buf = takeBuffer(size);
    const before = keptBuffers();
    for (let k = 0; k < 500; k++) {
      buf.set(bytesOf(`r${k}`.padEnd(60, '.')), 16 + 64 * k);
      log.append(a, 1, buf, 16 + 64 * k, 16 + 64 * k + 60);
    }
    expect(log.seal(buf, 16 + 64 * 500)).toBe(true);
    const mark = log.appended;
    // The next batch (another buffer) is still unconfirmed: the first buffer is not free before its own records are.
    const next = new Uint8Array(size);
    next.set(bytesOf('after'), 0);
    log.append(a, 1, next, 0, 5);
    log.seal(next, 5);
    log.confirm(mark - 1);
    expect(keptBuffers()).toBe(before);
    log.confirm(mark);
    expect(keptBuffers()).toBe(before + 1);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(['1:after']);
    // Taken back by a writer, so other tests start from the same pool.
    expect(takeBuffer(size)).toBe(buf);
  });

  it('the buffer of the batch being written is never recycled, even when the budget drops its records', () => {
    const budget = new ReplayBudget(3 * (60 + OVERHEAD));
    const log = new ReplayLog(budget);
    const a = owner();
    const live = new Uint8Array(16_384);
    const before = keptBuffers();
    for (let k = 0; k < 10; k++) {
      live.set(bytesOf(`${k}`.repeat(60)), 64 * k);
      log.append(a, 1, live, 64 * k, 64 * k + 60);
    }
    // Over budget: the oldest records went, each from the buffer still being written.
    expect(log.length).toBe(3);
    // A record larger than the budget empties the log: the buffer is still the writer's.
    live.set(bytesOf('z'.repeat(300)), 1024);
    log.append(a, 1, live, 1024, 1324);
    expect(log.length).toBe(1);
    expect(keptBuffers()).toBe(before);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual([`1:${'z'.repeat(300)}`]);
  });

  it('kept buffers, copied chunks and recycled buffers in turn: every record comes back as staged', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    const sent: string[] = [];
    const size = 16_384;
    let buf = takeBuffer(size);
    for (let batch = 0; batch < 60; batch++) {
      // Full batches (kept) and short ones (copied) in turn; a writer reusing buffers scribbles on the old one.
      const records = batch % 3 === 2 ? 3 : 240;
      for (let k = 0; k < records; k++) {
        const body = `b${batch}r${k}`.padEnd(60, '-');
        buf.set(bytesOf(body), 64 * k);
        log.append(a, 1, buf, 64 * k, 64 * k + 60);
        sent.push(`1:${body}`);
      }
      const mark = log.appended;
      if (log.seal(buf, 64 * records)) {
        buf = takeBuffer(size);
        buf.fill(0x21);
      }
      // Confirm all but the last few batches' worth, so chunks and buffers are let go while others are held.
      if (batch % 4 === 3) log.confirm(mark - 500);
    }
    const held = log.length;
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(sent.slice(sent.length - held));
    giveBuffer(buf);
  });

  it('a buffer the records are not in is not kept: the writer grew out of theirs after the last one', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    const old = new Uint8Array(16_384);
    for (let k = 0; k < 200; k++) {
      old.set(bytesOf(`${k}`.padEnd(64, '.')), 64 * k);
      log.append(a, 1, old, 64 * k, 64 * k + 64);
    }
    // The encoder grew into a new buffer (a copy of the old) and wrote records of other streams.
    const grown = new Uint8Array(32_768);
    grown.set(old);
    expect(log.seal(grown, 20_000)).toBe(false);
    old.fill(0);
    log.handOut(nextReplayRound(), []);
    expect(a.got[199]).toBe(`1:${'199'.padEnd(64, '.')}`);
  });
});
