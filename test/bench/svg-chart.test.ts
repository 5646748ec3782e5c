// The bench's chart writer: fixed data in, a well-formed SVG document out, with one polyline per
// series per panel, the axis labels and one legend entry per series.
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs bench module without type declarations
import { fmtTick, niceTicks, svgChart } from '../../bench/svg-chart.mjs';

/** Tags balance and nest: every opened element is closed in order (a minimal well-formedness check). */
function wellFormed(svg: string): boolean {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z][\w-]*)[^>]*?(\/?)>/g)) {
    const [, close, name, selfClose] = m;
    if (selfClose) continue;
    if (close) {
      if (stack.pop() !== name) return false;
    } else stack.push(name!);
  }
  return stack.length === 0;
}

const data = {
  title: 'cost <curve> & co',
  caption: 'fixed data',
  panels: [
    {
      title: 'Throughput',
      xLabel: 'X streams',
      yLabel: 'tokens/s',
      xLog: true,
      series: [
        {
          name: 'a',
          points: [
            { x: 256, y: 1e6 },
            { x: 1024, y: 2e6 },
            { x: 4096, y: 1.5e6 },
          ],
        },
        {
          name: 'b',
          points: [
            { x: 256, y: 3e6 },
            { x: 1024, y: null },
            { x: 4096, y: 2e6 },
          ],
        },
        {
          name: 'c',
          points: [
            { x: 256, y: 2e5 },
            { x: 4096, y: 1e5 },
          ],
        },
      ],
    },
    {
      title: 'CPU',
      xLabel: 'Y peers',
      yLabel: 'CPU µs per token',
      xLog: true,
      series: [
        {
          name: 'a',
          points: [
            { x: 1, y: 0.7 },
            { x: 4, y: 0.9 },
          ],
        },
        {
          name: 'b',
          points: [
            { x: 1, y: 0.3 },
            { x: 4, y: 0.4 },
          ],
        },
        { name: 'c', points: [] },
      ],
    },
  ],
};

describe('bench/svg-chart.mjs', () => {
  it('draws a well-formed SVG with one polyline per non-empty series and labelled axes', () => {
    const svg: string = svgChart(data);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(wellFormed(svg)).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(5); // 3 + 2: the empty series draws nothing
    expect(svg.match(/<circle /g)).toHaveLength(3 + 2 + 2 + 2 + 2); // the null point has no marker
    for (const label of ['X streams (log scale)', 'Y peers (log scale)', 'tokens/s', 'CPU µs per token'])
      expect(svg).toContain(`>${label}</text>`);
    expect(svg.match(/<g class="legend">/g)).toHaveLength(3);
    expect(svg).toContain('cost &lt;curve&gt; &amp; co');
    // x ticks sit at the measured values
    for (const t of ['256', '1,024', '4,096']) expect(svg).toContain(`>${t}</text>`);
  });

  it('keeps a series colour across panels and puts points on a log x axis evenly', () => {
    const svg: string = svgChart(data);
    const strokes = [...svg.matchAll(/<polyline fill="none" stroke="(#[0-9a-f]+)"[^>]*points="([^"]+)"><title>(\w)/g)];
    const colour = (n: string) => new Set(strokes.filter((m) => m[3] === n).map((m) => m[1]));
    expect(colour('a').size).toBe(1);
    expect([...colour('a')][0]).not.toBe([...colour('b')][0]);
    const xs = strokes[0]![2]!.split(' ').map((p) => Number(p.split(',')[0]));
    expect(xs[1]! - xs[0]!).toBeCloseTo(xs[2]! - xs[1]!, 0); // 256 → 1,024 → 4,096: equal steps
  });

  it('formats ticks and picks 1/2/5 steps from 0', () => {
    expect(fmtTick(1_500_000)).toBe('1.5M');
    expect(fmtTick(2500)).toBe('2.5k');
    expect(fmtTick(0.75)).toBe('0.75');
    expect(niceTicks(7.2e6)).toEqual([0, 2e6, 4e6, 6e6, 8e6]);
    expect(niceTicks(0)).toEqual([0, 1]);
  });
});
