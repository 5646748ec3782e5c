/** The figures of a resume scenario: how long the page waited, per lost link, to stream again. */
import type { Recovery } from '../page/api.ts';

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/**
 * One line, p50 and max over the cuts, ms after each cut (`cutWallMs[i]`, `Date.now()` just before
 * cut i): the page saw the link go down, the link was back, every stream flowed again; and the resumes
 * alone (link back → every stream flowing).
 */
export function recoverySummary(streams: number, cutWallMs: readonly number[], rs: readonly Recovery[]): string {
  const f = (pick: (r: Recovery, i: number) => number): string => {
    const xs = rs.map(pick).sort((a, b) => a - b);
    return `p50 ${percentile(xs, 50).toFixed(0)} ms, max ${(xs[xs.length - 1] ?? NaN).toFixed(0)} ms`;
  };
  const seen = (r: Recovery, i: number): number => r.downWallMs - cutWallMs[i]!;
  return `${streams} streams, ${rs.length} cuts; after a cut: page saw it ${f(seen)}, link back ${f((r, i) => seen(r, i) + r.linkBackMs)}, every stream flowing again ${f((r, i) => seen(r, i) + r.allFlowingMs)}; the resumes alone (link back → every stream flowing) ${f((r) => r.allFlowingMs - r.linkBackMs)}`;
}
