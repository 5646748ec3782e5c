// The lane's replay log (docs/protocol.md §8.3): the records of resumable streams staged on a lane,
// in staging order, kept until a PING behind their batch is answered and handed back, per stream and
// oldest first, when the link is lost. Pure: driven here directly.
import { describe, expect, it } from 'vitest';
import { nextReplayRound, ReplayLog, type ReplayOwner } from '../../src/mux/replay-log.ts';
import { ReplayBudget } from '../../src/stream/replay-ring.ts';

/** An owner that records what it is handed back. */
function owner(): ReplayOwner & { got: unknown[]; done: boolean[] } {
  return {
    replayRound: 0,
    got: [],
    done: [],
    recover(kind, payload) {
      this.got.push(`${kind}:${String(payload)}`);
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
    for (let i = 0; i < 200; i++) log.append(i % 2 === 0 ? a : b, 0, `x${i}`, 2);
    log.confirm(150);
    for (let i = 200; i < 700; i++) log.append(i % 2 === 0 ? a : b, 1, `x${i}`, 2);
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
    for (let i = 0; i < 10; i++) log.append(a, 1, i, 4);
    expect(budget.used).toBe(10 * (4 + OVERHEAD));
    const mark = log.appended;
    for (let i = 10; i < 13; i++) log.append(a, 1, i, 4);
    log.confirm(mark);
    expect(log.length).toBe(3);
    expect(log.first).toBe(10);
    expect(budget.used).toBe(3 * (4 + OVERHEAD));
    // An older mark confirms nothing more.
    log.confirm(5);
    expect(log.length).toBe(3);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(['1:10', '1:11', '1:12']);
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
    for (let i = 0; i < 7; i++) log.append(a, 0, i, 10);
    expect(finished).toBe(0);
    expect(log.length).toBe(5);
    expect(budget.used).toBe(5 * (10 + OVERHEAD));
    // A record larger than the whole budget empties the log and is still kept.
    log.append(a, 0, 'big', 1000);
    expect(log.length).toBe(1);
    log.handOut(nextReplayRound(), []);
    expect(a.got).toEqual(['0:big']);
    expect(budget.used).toBe(0);
  });

  it('one stream leaving the log takes its records back and leaves the others in place, charged once', () => {
    const budget = new ReplayBudget(1 << 30);
    const log = new ReplayLog(budget);
    const a = owner();
    const b = owner();
    for (let i = 0; i < 6; i++) log.append(i < 3 ? a : b, 2, i, 4);
    log.append(a, 2, 6, 4);
    log.handOutOne(a);
    expect(a.got).toEqual(['2:0', '2:1', '2:2', '2:6']);
    expect(budget.used).toBe(3 * (4 + OVERHEAD));
    // Its emptied entries are confirmed with the rest without being charged back twice.
    log.confirm(log.appended - 1);
    expect(budget.used).toBe(0);
    const reached: ReplayOwner[] = [];
    log.handOut(nextReplayRound(), reached);
    expect(reached).toEqual([]);
    expect(b.got).toEqual([]);
  });
});
