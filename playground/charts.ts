/**
 * Three tiny canvas charts (no chart library): line series, labelled bars, and a grid of credit
 * cells. Each call redraws the whole canvas at the device's pixel ratio.
 */

/** A fixed-length ring of the latest values. */
export class Series {
  readonly #values: number[] = [];
  readonly #capacity: number;
  constructor(capacity: number) {
    this.#capacity = capacity;
  }
  push(v: number): void {
    this.#values.push(v);
    if (this.#values.length > this.#capacity) this.#values.shift();
  }
  /** Forget every value: a new engine's figures must not be drawn on the old one's scale. */
  clear(): void {
    this.#values.length = 0;
  }
  get values(): readonly number[] {
    return this.#values;
  }
  get capacity(): number {
    return this.#capacity;
  }
}

const MUTED = '#8a96a3';
const GRID = '#2a3440';

function context(canvas: HTMLCanvasElement): { g: CanvasRenderingContext2D; w: number; h: number } {
  const ratio = globalThis.devicePixelRatio || 1;
  const w = canvas.clientWidth || 300;
  const h = canvas.height / (Number(canvas.dataset['ratio']) || 1);
  if (canvas.dataset['ratio'] !== String(ratio) || canvas.width !== Math.round(w * ratio)) {
    canvas.dataset['ratio'] = String(ratio);
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(h * ratio);
    canvas.style.height = `${h}px`;
  }
  const g = canvas.getContext('2d')!;
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  g.font = '10px system-ui, sans-serif';
  return { g, w, h };
}

function niceMax(v: number): number {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

/**
 * Line series, each scaled to its own maximum (printed in its colour, top left), or all to the
 * largest one with `shared` (when the lines are to be compared).
 */
export function drawLines(
  canvas: HTMLCanvasElement,
  lines: ReadonlyArray<{ series: Series; color: string }>,
  shared = false,
): void {
  const { g, w, h } = context(canvas);
  const top = 12;
  g.strokeStyle = GRID;
  g.beginPath();
  g.moveTo(0, h - 0.5);
  g.lineTo(w, h - 0.5);
  g.stroke();
  let labelX = 2;
  const all = shared ? niceMax(Math.max(1, ...lines.flatMap((l) => l.series.values))) : 0;
  for (const { series, color } of lines) {
    const v = series.values;
    const max = shared ? all : niceMax(Math.max(1, ...v));
    g.fillStyle = color;
    g.fillText(String(max), labelX, 9);
    labelX += g.measureText(String(max)).width + 8;
    if (v.length < 2) continue;
    const step = w / (series.capacity - 1);
    const x0 = w - (v.length - 1) * step;
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.beginPath();
    v.forEach((y, i) => {
      const px = x0 + i * step;
      const py = h - 1 - (y / max) * (h - top);
      if (i === 0) g.moveTo(px, py);
      else g.lineTo(px, py);
    });
    g.stroke();
  }
}

/** Vertical bars with a label under each and the value above it. */
export function drawBars(
  canvas: HTMLCanvasElement,
  values: readonly number[],
  labels: readonly string[],
  color: string,
): void {
  const { g, w, h } = context(canvas);
  const n = Math.max(1, values.length);
  const max = Math.max(1, ...values);
  const slot = w / n;
  const bottom = h - 14;
  g.textAlign = 'center';
  values.forEach((v, i) => {
    const bh = (v / max) * (bottom - 14);
    const x = i * slot + slot * 0.15;
    g.fillStyle = color;
    g.fillRect(x, bottom - bh, slot * 0.7, bh);
    g.fillStyle = MUTED;
    g.fillText(labels[i] ?? '', i * slot + slot / 2, h - 3);
    if (v > 0) {
      g.fillStyle = '#d8dee6';
      g.fillText(String(Math.round(v)), i * slot + slot / 2, bottom - bh - 3);
    }
  });
  g.textAlign = 'start';
}

/**
 * One cell per slot: the green part is the credit the sender still holds (of `limit`), the blue
 * sliver the records delivered but not yet read, red when no credit is left.
 */
export function drawCreditGrid(
  canvas: HTMLCanvasElement,
  cells: ReadonlyArray<{ remaining: number; buffered: number; limit: number }>,
): void {
  const { g, w, h } = context(canvas);
  if (cells.length === 0) {
    g.fillStyle = MUTED;
    g.fillText('no open slots', 4, 14);
    return;
  }
  // Square-ish cells that fit every slot in the canvas.
  const side = Math.max(3, Math.floor(Math.sqrt((w * h) / cells.length)) - 1);
  let cols = Math.max(1, Math.floor(w / (side + 1)));
  while (Math.ceil(cells.length / cols) * (side + 1) > h && cols < cells.length) cols++;
  const size = Math.max(2, Math.min(side, Math.floor(w / cols) - 1));
  cells.forEach((c, i) => {
    const x = (i % cols) * (size + 1);
    const y = Math.floor(i / cols) * (size + 1);
    const f = c.limit === 0 ? 0 : Math.max(0, Math.min(1, c.remaining / c.limit));
    g.fillStyle = f === 0 ? '#ff6b6b' : '#1d2a33';
    g.fillRect(x, y, size, size);
    if (f > 0) {
      g.fillStyle = '#3ecf8e';
      g.fillRect(x, y + size * (1 - f), size, size * f);
    }
    if (c.buffered > 0) {
      g.fillStyle = '#4ea1ff';
      g.fillRect(x, y, Math.max(1, size * Math.min(1, c.buffered / c.limit)), 2);
    }
  });
}
