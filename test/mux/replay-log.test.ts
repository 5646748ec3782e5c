// The lane's replay log (docs/protocol.md §8.3): the records of resumable streams staged on a lane,
// in staging order, kept until a PING behind their batch is answered and handed back, per stream and
// oldest first, when the link is lost. Pure: driven here directly.
import { describe, expect, it } from 'vitest';
import { nextReplayRound, ReplayLog, type ReplayOwner } from '../../src/mux/replay-log.ts';
import { ReplayBudget } from '../../src/stream/replay-ring.ts';
import { keptBuffers, takeBuffer } from '../../src/mux/replay-chunks.ts';

const bytesOf = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Take every buffer the shared free list keeps (each size it keeps), writing `fill` over each, as a new owner would. */
function takeAllKept(fill: number): void {
  for (const size of [16_384, 32_768, 65_536]) {
    for (;;) {
      const n = keptBuffers();
      const b = takeBuffer(size);
      if (keptBuffers() === n) break;
      b.fill(fill);
    }
  }
}
const textOf = (v: unknown): string => (v instanceof Uint8Array ? `b'${new TextDecoder().decode(v)}'` : String(v));

/** An owner that records what it is handed back. */
function owner(): ReplayOwner & { got: unknown[]; done: boolean[] } {
  return {
    replayRound: 0,
    got: [],
    done: [],
    recover(kind, payload) {
      this.got.push(`${kind}:${textOf(payload)}`);
    },
    recovered(live) {
      this.done.push(live);
    },
  };
}

const OVERHEAD = 16;

/**
 * Keep `o`'s record whose encoded body is `body` as the batcher does: noted where it sits in an open
 * batch (after the 16-byte batch header and its 13-byte record header), copied out when that batch is
 * sealed; the batch's buffer is then written over, as the encoder reuses it.
 */
function keep(log: ReplayLog, o: ReplayOwner, kind: number, body: string | Uint8Array): void {
  const bytes = typeof body === 'string' ? bytesOf(body) : body;
  const buf = new Uint8Array(29 + bytes.byteLength);
  buf.set(bytes, 29);
  log.appendStaged(o, kind, buf, 29, 29 + bytes.byteLength);
  log.seal(buf);
  buf.fill(0x3f);
}

describe('replay log', () => {
  it('hands each stream its own records back in staging order, across growth and wrap-around, and reaches each once', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const b = owner();
    // Wrap the array: confirm the front while appending past its first size.
    for (let i = 0; i < 200; i++) keep(log, i % 2 === 0 ? a : b, 0, `x${i}`);
    log.confirm(150);
    for (let i = 200; i < 700; i++) keep(log, i % 2 === 0 ? a : b, 1, `x${i}`);
    expect(log.length).toBe(550);
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(reached).toEqual([a, b]);
    const expected = (parity: number) =>
      Array.from({ length: 700 - 150 }, (_, k) => 150 + k)
        .filter((i) => i % 2 === parity)
        .map((i) => `${i < 200 ? 0 : 1}:b'x${i}'`);
    expect(a.got).toEqual(expected(0));
    expect(b.got).toEqual(expected(1));
    expect(log.length).toBe(0);
    expect(budget.used).toBe(0);
  });

  it('a confirmation drops every record before its mark and gives their bytes back to the node budget', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    for (let i = 0; i < 10; i++) keep(log, a, 1, `${i}`.padStart(4, '0'));
    expect(budget.used).toBe(10 * (4 + OVERHEAD));
    const mark = log.appended;
    for (let i = 10; i < 13; i++) keep(log, a, 1, `${i}`.padStart(4, '0'));
    log.confirm(mark);
    expect(log.length).toBe(3);
    expect(log.first).toBe(10);
    expect(budget.used).toBe(3 * (4 + OVERHEAD));
    // An older mark confirms nothing more.
    log.confirm(5);
    expect(log.length).toBe(3);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(["1:b'0010'", "1:b'0011'", "1:b'0012'"]);
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
    for (let i = 0; i < 7; i++) keep(log, a, 0, `${i}`.padStart(10, '0'));
    expect(finished).toBe(0);
    expect(log.length).toBe(5);
    expect(budget.used).toBe(5 * (10 + OVERHEAD));
    // A record larger than the whole budget empties the log and is still kept.
    keep(log, a, 0, 'big'.padEnd(1000, '.'));
    expect(log.length).toBe(1);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual([`0:b'${'big'.padEnd(1000, '.')}'`]);
    expect(budget.used).toBe(0);
  });

  it('one stream leaving the log takes its records back and leaves the others in place, charged once', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const b = owner();
    for (let i = 0; i < 6; i++) keep(log, i < 3 ? a : b, 2, `${i}`.padStart(4, '0'));
    keep(log, a, 2, '0006');
    log.handOutOne(a);
    expect(a.got).toEqual(["2:b'0000'", "2:b'0001'", "2:b'0002'", "2:b'0006'"]);
    expect(budget.used).toBe(3 * (4 + OVERHEAD));
    // Its emptied entries are confirmed with the rest without being charged back twice.
    log.confirm(log.appended - 1);
    expect(budget.used).toBe(0);
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(reached).toEqual([]);
    expect(b.got).toEqual([]);
  });

  it('a chunk of copied bodies is let go (and recycled) once its last entry is confirmed, not before; the newest is refilled', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    const body = new Uint8Array(100).fill(7);
    // Enough bodies for the log's chunks to reach the recycled sizes (16–64 KiB), interleaved with references.
    for (let k = 0; k < 2000; k++) {
      keep(log, a, 2, body);
      keep(log, a, 1, body);
    }
    const before = keptBuffers();
    log.confirm(log.appended - 3);
    expect(keptBuffers()).toBeGreaterThan(before);
    // The last entries still point into the newest chunk: their bodies are intact.
    log.handOut(nextReplayRound(), []);
    expect(a.got.slice(-3)).toEqual([`1:${textOf(body)}`, `2:${textOf(body)}`, `1:${textOf(body)}`]);
  });

  it('recycled chunks written by others never show in what a stream is handed back', () => {
    // The link is lost after 1, 2, … 24 confirmations: each time, what is held spans several chunks,
    // the oldest of them next to let go.
    for (let cuts = 1; cuts <= 24; cuts++) {
      const log = new ReplayLog(new ReplayBudget(1 << 30));
      const a = owner();
      const sent: string[] = [];
      takeAllKept(0);
      for (let k = 0; k < 250 * cuts; k++) {
        const body = bytesOf(`record ${k} `.padEnd(90, '*'));
        keep(log, a, 2, body);
        sent.push(`2:${textOf(body)}`);
        if (k % 7 === 0) {
          keep(log, a, 0, `ref ${k}`);
          sent.push(`0:b'ref ${k}'`);
        }
        if (k % 250 === 249) {
          // All but the newest 1,500 confirmed; whoever takes a recycled chunk scribbles on it.
          log.confirm(log.appended - 1500);
          takeAllKept(0x21);
        }
      }
      const held = log.length;
      log.handOut(nextReplayRound(), []);
      expect(a.got, `lost after ${cuts} confirmations`).toEqual(sent.slice(sent.length - held));
    }
  });

  it('the budget drops copied bodies oldest first like any record, and the log refills its chunk once empty', () => {
    const budget = new ReplayBudget(3 * (50 + OVERHEAD));
    const log = new ReplayLog(budget);
    const a = owner();
    for (let k = 0; k < 10; k++) keep(log, a, 2, `${k}`.repeat(50));
    expect(log.length).toBe(3);
    expect(budget.used).toBe(3 * (50 + OVERHEAD));
    log.confirm(log.appended);
    expect(budget.used).toBe(0);
    keep(log, a, 2, 'z'.repeat(50));
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual([`2:${textOf(bytesOf('z'.repeat(50)))}`]);
  });

  it('an emptied log holds no chunk, and a large body gets a chunk of its own that goes with its entry', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    keep(log, a, 2, 'small');
    expect(log.chunkBytes).toBeGreaterThan(0);
    log.confirm(log.appended);
    expect(log.chunkBytes).toBe(0);
    // A 200 KiB body, then a small one: once the large body is confirmed, its chunk goes although the
    // log still holds the small one (in a chunk of the usual size).
    keep(log, a, 2, new Uint8Array(200 * 1024));
    keep(log, a, 0, 'still here');
    const small = log.chunkBytes - 200 * 1024;
    expect(small).toBeGreaterThan(0);
    expect(small).toBeLessThanOrEqual(64 * 1024);
    log.confirm(log.appended - 1);
    expect(log.chunkBytes).toBe(small);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(["0:b'still here'"]);
  });
});

describe('replay log: bodies noted in the open batch and copied out when it is written', () => {
  /** A batch buffer with `bodies` written one after another from offset 16, as a batcher stages them. */
  function batchOf(bodies: string[]): { buf: Uint8Array; spans: Array<[number, number]> } {
    const buf = new Uint8Array(4096);
    const spans: Array<[number, number]> = [];
    let at = 16;
    for (const b of bodies) {
      const bytes = bytesOf(b);
      // 13 bytes of record header before each body, which the log never keeps.
      at += 13;
      buf.set(bytes, at);
      spans.push([at, at + bytes.byteLength]);
      at += bytes.byteLength;
    }
    return { buf, spans };
  }

  it('hands back each record as its own bytes, oldest first, even once the batch buffer is written over', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const a = owner();
    const b = owner();
    const first = batchOf(['a0', 'b0', 'a1']);
    log.appendStaged(a, 0, first.buf, ...first.spans[0]!);
    log.appendStaged(b, 0, first.buf, ...first.spans[1]!);
    log.appendStaged(a, 0, first.buf, ...first.spans[2]!);
    expect(log.staged).toBe(true);
    log.seal(first.buf);
    expect(log.staged).toBe(false);
    // The encoder reuses its buffer for the next batch.
    first.buf.fill(0x7a);
    const second = batchOf(['b1']);
    log.appendStaged(b, 0, second.buf, ...second.spans[0]!);
    log.seal(second.buf);
    second.buf.fill(0x7a);
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(a.got).toEqual(["0:b'a0'", "0:b'a1'"]);
    expect(b.got).toEqual(["0:b'b0'", "0:b'b1'"]);
    expect(budgetOf(log)).toBe(0);
  });

  it('confirming a sealed batch lets its chunk go, and the budget counts the bodies alone', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const { buf, spans } = batchOf(['one', 'two']);
    for (const s of spans) log.appendStaged(a, 0, buf, ...s);
    expect(budget.used).toBe(2 * (3 + OVERHEAD));
    log.seal(buf);
    expect(log.chunkBytes).toBeGreaterThan(0);
    log.confirm(log.appended);
    expect(log.length).toBe(0);
    expect(log.chunkBytes).toBe(0);
    expect(budget.used).toBe(0);
  });

  it('entries dropped for the budget before the seal are skipped by it; the rest still come back whole', () => {
    // Room for two records: the third drops the first.
    const log = new ReplayLog(new ReplayBudget(2 * (2 + OVERHEAD)));
    const a = owner();
    const { buf, spans } = batchOf(['x0', 'x1', 'x2']);
    for (const s of spans) log.appendStaged(a, 0, buf, ...s);
    expect(log.length).toBe(2);
    log.seal(buf);
    buf.fill(0);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(["0:b'x1'", "0:b'x2'"]);
  });

  it('a record it does not keep between two it keeps is not copied: what the chunks hold stays within what the budget counts', () => {
    // Two 1-byte bodies with a 60 KiB record of another stream between them, ten batches over.
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    for (let k = 0; k < 10; k++) {
      const buf = new Uint8Array(61_500);
      buf[29] = 0x61 + k;
      buf[61_440] = 0x41 + k;
      log.appendStaged(a, 0, buf, 29, 30);
      log.appendStaged(a, 0, buf, 61_440, 61_441);
      log.seal(buf);
    }
    expect(log.bytes).toBe(20 * (1 + OVERHEAD));
    // Held beyond the counted bytes: chunks are sized to what the log holds (1 KiB here), never the 60 KiB between.
    expect(log.chunkBytes).toBeLessThanOrEqual(2048);
    log.handOut(nextReplayRound(), []);
    expect(a.got.slice(0, 4)).toEqual(["0:b'a'", "0:b'A'", "0:b'b'", "0:b'B'"]);
  });

  it('finds each body in the batch it came from across many batches, runs split by records it skips, growth while a batch is open, confirmations inside a batch and a stream leaving', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const b = owner();
    const c = owner();
    const staged: Array<[ReplayOwner, string]> = [];
    let n = 0;
    // Batches of 1 to 300 bodies (the log starts with room for 256 entries, so one grows it while
    // open); every fifth body is another stream's that the log does not keep, which splits the run.
    for (const count of [1, 300, 7, 120, 64, 250, 3]) {
      const buf = new Uint8Array(64 * 1024);
      let at = 16;
      for (let k = 0; k < count; k++) {
        at += 13;
        const body = bytesOf(`r${n}`);
        buf.set(body, at);
        const o = n % 3 === 0 ? a : n % 3 === 1 ? b : c;
        if (n % 5 !== 4) {
          log.appendStaged(o, n % 3, buf, at, at + body.byteLength);
          staged.push([o, `${n % 3}:b'r${n}'`]);
        }
        at += body.byteLength;
        n++;
      }
      log.seal(buf);
      buf.fill(0x21);
      // Confirm part of what is held, so confirmations land inside a batch's run.
      if (count > 100) log.confirm(log.first + Math.floor(log.length / 3));
    }
    const confirmed = staged.length - log.length;
    log.handOutOne(c);
    const cExpected = staged.slice(confirmed).filter(([o]) => o === c);
    expect(c.got).toEqual(cExpected.map(([, s]) => s));
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(reached).toEqual([a, b]);
    for (const o of [a, b])
      expect((o as ReturnType<typeof owner>).got).toEqual(
        staged
          .slice(confirmed)
          .filter(([x]) => x === o)
          .map(([, s]) => s),
      );
    expect(budget.used).toBe(0);
    expect(log.chunkBytes).toBe(0);
  });

  it('refuses to hand out records whose bodies were never copied out of the batch (a seal must come first)', () => {
    const log = new ReplayLog(new ReplayBudget(1 << 30));
    const { buf, spans } = batchOf(['z']);
    log.appendStaged(owner(), 0, buf, ...spans[0]!);
    expect(() => log.handOut(nextReplayRound(), [])).toThrow(/not sealed/);
  });
});

/** Bytes a log holds, as charged to its budget. */
function budgetOf(log: ReplayLog): number {
  return log.bytes;
}
