import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { assertConformance, replay } from './conformance-runner.ts';
import type { ConformanceFile } from './conformance-runner.ts';

const file = JSON.parse(readFileSync(new URL('./conformance.json', import.meta.url), 'utf8')) as ConformanceFile;

describe('conformance scripts', () => {
  it('every section is non-empty', () => {
    expect(file.gate.length).toBeGreaterThan(0);
    expect(file.window.length).toBeGreaterThan(0);
    expect(file.negotiate.length).toBeGreaterThan(0);
    expect(file.grant_target.length).toBeGreaterThan(0);
  });

  it('replays gate, window, negotiate and grant_target against the runtime objects', () => {
    expect(() => assertConformance(file)).not.toThrow();
    expect(replay(file).total).toBe(
      file.gate.length + file.window.length + file.negotiate.length + file.grant_target.length,
    );
  });

  it('the runner collects every disagreement and fails once with "N of M scripts disagree; first: …"', () => {
    const broken: ConformanceFile = structuredClone(file);
    // A wrong gate answer at step 2 (the model says wait) and a wrong grant_target.
    (broken.gate[0]!.steps[2] as { answer: string | null }).answer = 'acquired';
    broken.grant_target[1] = { streams: ['s1', 's2'], named: null, matched: true, target: 's1' };
    const report = replay(broken);
    expect(report.failures).toHaveLength(2);
    expect(report.failures[0]).toMatch(/^gate\[0\].*step 2/);
    expect(() => assertConformance(broken)).toThrow(
      new RegExp(`^2 of ${report.total} scripts disagree; first: gate\\[0\\]`),
    );
  });

  it('the runner stops a script at its first disagreement', () => {
    const broken: ConformanceFile = structuredClone(file);
    broken.window[0]!.steps[1]!.remaining = 99;
    broken.window[0]!.steps[3]!.grant = 99;
    const report = replay(broken);
    expect(report.failures).toHaveLength(1);
    expect(report.failures[0]).toContain('step 1');
  });

  it('a refusal that does not name initial_credit disagrees', () => {
    const broken: ConformanceFile = structuredClone(file);
    broken.negotiate = [{ ours: 32, theirs: 16, window: null }];
    expect(() => assertConformance(broken)).toThrow(/1 of \d+ scripts disagree; first: negotiate\[0\]/);
  });

  it('an empty section fails the run', () => {
    const broken: ConformanceFile = { ...structuredClone(file), window: [] };
    expect(() => replay(broken)).toThrow(/section "window" is empty/);
  });
});
