// A line chart as plain hand-written SVG (no dependency), for the bench's scale curves: a grid of
// panels, each with a log or linear x axis, a linear y axis from 0, one polyline (with point
// markers) per series, labelled axes and one legend shared by all panels (series keep their colour
// across panels by name).

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
const PANEL_W = 440;
const PANEL_H = 300;
// Plot area inside a panel: room on the left for y tick labels, below for x ticks and the axis label.
const M = { left: 64, right: 16, top: 30, bottom: 48 };

/** Text safe inside an SVG element or attribute. */
export const esc = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

/** 1,500,000 → "1.5M", 2,500 → "2.5k", 0.75 → "0.75". */
export function fmtTick(v) {
  const a = Math.abs(v);
  const trim = (x) => String(Number(x.toPrecision(3)));
  if (a >= 1e6) return `${trim(v / 1e6)}M`;
  if (a >= 1e3) return `${trim(v / 1e3)}k`;
  return trim(v);
}

/** Tick values from 0 to at least `max`, a 1/2/5 step, about `n` of them. */
export function niceTicks(max, n = 5) {
  if (!(max > 0)) return [0, 1];
  const raw = max / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw);
  const out = [];
  for (let v = 0; v < max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

const fin = (v) => typeof v === 'number' && Number.isFinite(v);

function panel(p, ox, oy, colorOf) {
  const w = PANEL_W - M.left - M.right;
  const h = PANEL_H - M.top - M.bottom;
  const pts = p.series.flatMap((s) => s.points.filter((q) => fin(q.x) && fin(q.y) && (!p.xLog || q.x > 0)));
  const xs = [...new Set(pts.map((q) => q.x))].sort((a, b) => a - b);
  const tx = (v) => (p.xLog ? Math.log10(v) : v);
  const x0 = xs.length ? tx(xs[0]) : 0;
  const x1 = xs.length > 1 ? tx(xs[xs.length - 1]) : x0 + 1;
  const yTicks = niceTicks(Math.max(0, ...pts.map((q) => q.y)));
  const yMax = yTicks[yTicks.length - 1];
  const X = (v) => ox + M.left + ((tx(v) - x0) / (x1 - x0)) * w;
  const Y = (v) => oy + M.top + h - (v / yMax) * h;
  const r = (v) => v.toFixed(1);
  const o = [];
  o.push(`<g class="panel">`);
  o.push(
    `<text class="title" x="${r(ox + M.left + w / 2)}" y="${r(oy + 18)}" text-anchor="middle">${esc(p.title)}</text>`,
  );
  o.push(`<rect x="${r(ox + M.left)}" y="${r(oy + M.top)}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
  for (const t of yTicks) {
    o.push(
      `<line x1="${r(ox + M.left)}" y1="${r(Y(t))}" x2="${r(ox + M.left + w)}" y2="${r(Y(t))}" stroke="#eee"/>`,
      `<text class="tick" x="${r(ox + M.left - 6)}" y="${r(Y(t) + 4)}" text-anchor="end">${esc(fmtTick(t))}</text>`,
    );
  }
  // x ticks at the measured x values: the scale points are what the reader compares.
  for (const v of xs) {
    o.push(
      `<line x1="${r(X(v))}" y1="${r(oy + M.top + h)}" x2="${r(X(v))}" y2="${r(oy + M.top + h + 4)}" stroke="#999"/>`,
      `<text class="tick" x="${r(X(v))}" y="${r(oy + M.top + h + 17)}" text-anchor="middle">${esc(v.toLocaleString('en-US'))}</text>`,
    );
  }
  o.push(
    `<text class="axis" x="${r(ox + M.left + w / 2)}" y="${r(oy + PANEL_H - 10)}" text-anchor="middle">${esc(p.xLabel)}${p.xLog ? ' (log scale)' : ''}</text>`,
    `<text class="axis" transform="translate(${r(ox + 14)} ${r(oy + M.top + h / 2)}) rotate(-90)" text-anchor="middle">${esc(p.yLabel)}</text>`,
  );
  for (const s of p.series) {
    const q = s.points.filter((pt) => fin(pt.x) && fin(pt.y) && (!p.xLog || pt.x > 0)).sort((a, b) => a.x - b.x);
    if (q.length === 0) continue;
    const c = colorOf(s.name);
    o.push(
      `<polyline fill="none" stroke="${c}" stroke-width="2" points="${q.map((pt) => `${r(X(pt.x))},${r(Y(pt.y))}`).join(' ')}"><title>${esc(s.name)}</title></polyline>`,
    );
    for (const pt of q) o.push(`<circle cx="${r(X(pt.x))}" cy="${r(Y(pt.y))}" r="3" fill="${c}"/>`);
  }
  o.push('</g>');
  return o.join('\n');
}

/**
 * The whole chart: `panels` laid out `cols` per row under a title, a caption line and the legend.
 * @param {{ title: string, caption?: string, cols?: number,
 *   panels: { title: string, xLabel: string, yLabel: string, xLog?: boolean,
 *             series: { name: string, points: { x: number, y: number | null }[] }[] }[] }} chart
 * @returns {string} an SVG document
 */
export function svgChart({ title, caption = '', cols = 2, panels }) {
  const names = [...new Set(panels.flatMap((p) => p.series.map((s) => s.name)))];
  const colorOf = (n) => COLORS[names.indexOf(n) % COLORS.length];
  const head = caption ? 76 : 58;
  const rows = Math.ceil(panels.length / cols);
  const W = PANEL_W * Math.min(cols, panels.length);
  const H = head + rows * PANEL_H;
  const o = [];
  o.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    '<style>.title{font-size:13px;font-weight:bold}.tick{font-size:11px;fill:#444}.axis{font-size:12px}.caption{font-size:11px;fill:#555}</style>',
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text class="title" x="${W / 2}" y="20" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  );
  if (caption) o.push(`<text class="caption" x="${W / 2}" y="38" text-anchor="middle">${esc(caption)}</text>`);
  // Legend: one row, centred.
  const item = 190;
  const lx = Math.max(8, (W - names.length * item) / 2);
  const ly = head - 16;
  names.forEach((n, i) => {
    const x = lx + i * item;
    o.push(
      `<g class="legend"><line x1="${x}" y1="${ly}" x2="${x + 24}" y2="${ly}" stroke="${colorOf(n)}" stroke-width="3"/>` +
        `<text x="${x + 30}" y="${ly + 4}">${esc(n)}</text></g>`,
    );
  });
  panels.forEach((p, i) => {
    o.push(panel(p, (i % cols) * PANEL_W, head + Math.floor(i / cols) * PANEL_H, colorOf));
  });
  o.push('</svg>');
  return `${o.join('\n')}\n`;
}
