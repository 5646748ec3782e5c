// The flush gate's optional Auto conditions (ending the window early), decided as a
// pure function of the clock the test passes in.
import { describe, expect, it } from 'vitest';
import { FlushGate, StagedKind } from '../../src/mux/flush-gate.ts';

const windowed = (extra: { onComplete?: boolean; atBytes?: number } = {}) =>
  new FlushGate({ kind: 'auto', onAdmission: false, maxLinger: 2, ...extra }, 1);

describe('FlushGate: Auto{onAdmission: false} conditions', () => {
  it('maxLinger: a record waits up to the window from the oldest staged record, never longer', () => {
    const g = windowed();
    g.onStage(10, StagedKind.Data);
    g.onStage(11, StagedKind.Data);
    expect(g.shouldFlush(11.9, false, 100)).toBe(false);
    expect(g.deadline()).toBe(12);
    expect(g.shouldFlush(12, false, 100)).toBe(true);
  });

  it('a data record counted without a time keeps the window of the oldest record, and counts as data', () => {
    const g = windowed();
    g.onStage(10, StagedKind.Data);
    g.onStageData();
    g.onStageData();
    expect(g.staged).toBe(3);
    expect(g.stagedData).toBe(3);
    expect(g.deadline()).toBe(12);
    expect(g.shouldFlush(11.9, false, 100)).toBe(false);
    expect(g.shouldFlush(12, false, 100)).toBe(true);
  });

  it('onComplete: writes once every live slot has data in the batch, not sooner than a window after the last data write', () => {
    const g = windowed({ onComplete: true });
    g.onWrite(0, true); // last write that carried data at t=0
    g.onStage(0.5, StagedKind.Data);
    // 3 of 4 live slots staged: wait for the window.
    expect(g.shouldFlush(1, false, 100, 4, 3)).toBe(false);
    // Complete, but within a window of the last data write: still wait.
    expect(g.shouldFlush(1.5, false, 100, 4, 4)).toBe(false);
    // Complete and a window after the last data write: write before the linger ends (0.5 + 2).
    expect(g.shouldFlush(2, false, 100, 4, 4)).toBe(true);
  });

  it('onComplete: a write without data (credit replies) does not hold the next lone record', () => {
    const g = windowed({ onComplete: true });
    g.onWrite(0, false);
    g.onStage(0.1, StagedKind.Data);
    expect(g.shouldFlush(0.1, false, 100, 1, 1)).toBe(true);
  });

  it('onComplete: credit replies alone never make a batch complete', () => {
    const g = windowed({ onComplete: true });
    g.onStage(0, StagedKind.CreditReply);
    expect(g.shouldFlush(0.5, false, 50, 1, 0)).toBe(false);
    expect(g.shouldFlush(1, false, 50, 1, 0)).toBe(true); // the reply window (1 ms) ends it
  });

  it('atBytes: the batch goes once it reaches the threshold, before the window', () => {
    const g = windowed({ atBytes: 1448 });
    g.onStage(0, StagedKind.Data);
    expect(g.shouldFlush(0.1, false, 1447)).toBe(false);
    expect(g.shouldFlush(0.1, false, 1448)).toBe(true);
  });

  it('urgent records and kicks write under every policy; an empty gate never writes', () => {
    for (const policy of [{ kind: 'manual' } as const, { kind: 'auto', onAdmission: false } as const]) {
      const g = new FlushGate(policy, 1);
      expect(g.shouldFlush(0, true, 0)).toBe(false);
      g.onStage(0, StagedKind.Data);
      expect(g.shouldFlush(1e6, false, 10)).toBe(false);
      expect(g.shouldFlush(0, true, 10)).toBe(true);
      g.onStage(0, StagedKind.Urgent);
      expect(g.shouldFlush(0, false, 10)).toBe(true);
    }
  });
});
