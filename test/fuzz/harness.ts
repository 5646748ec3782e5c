/**
 * The fuzz loop shared by `npm run fuzz` (test/fuzz/cli.ts) and the vitest fuzz tests: deal seeded
 * inputs to the targets round-robin, decode each under the allocation guard, and judge it. An input
 * escapes when its decoder throws anything but a LanemuxError with one of the target's codes, breaks
 * an invariant, asks one construction for more than the target's bound, or takes longer than
 * `maxMs` twice in a row (a hang that never returns is the CLI watchdog's: see cli.ts).
 */
import { LanemuxError } from '../../src/errors.ts';
import { AllocationGuard, hex, mulberry32 } from '../wire/helpers.ts';
import type { Target } from './targets.ts';

/** One input that escaped. */
export interface Escape {
  readonly target: string;
  readonly index: number;
  readonly hex: string;
  readonly why: string;
}

/** Per-target counts. */
export interface TargetStats {
  inputs: number;
  decoded: number;
  refused: number;
  escapes: number;
  ms: number;
}

export interface FuzzOptions {
  readonly seed: number;
  readonly inputs: number;
  readonly targets: readonly Target[];
  /** Time one input may take (twice, to tell a GC pause from a slow decode). Defaults to 250 ms. */
  readonly maxMs?: number;
  /** Stop after this many escapes. Defaults to 20. */
  readonly maxEscapes?: number;
  /** Called before each input is decoded (the CLI copies it where its watchdog can read it). */
  readonly onInput?: (index: number, target: number, input: Uint8Array) => void;
  /** Called after every chunk with the inputs done so far. */
  readonly onProgress?: (done: number) => void;
  readonly onEscape?: (e: Escape) => void;
}

export interface FuzzResult {
  readonly inputs: number;
  readonly ms: number;
  readonly escapes: Escape[];
  readonly stats: Record<string, TargetStats>;
  readonly guardConstructions: number;
}

const CHUNK = 1_000;

/** The outcome of one input: null when it decoded or was refused as documented. */
export function judge(target: Target, input: Uint8Array): { why: string | null; refused: boolean } {
  try {
    const problem = target.run(input);
    return { why: problem, refused: false };
  } catch (e) {
    if (e instanceof LanemuxError && target.codes.has(e.code)) return { why: null, refused: true };
    const what =
      e instanceof LanemuxError
        ? `threw ${e.constructor.name} ${e.code} (not documented for ${target.name})`
        : `threw ${e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e)}`;
    return { why: what.slice(0, 300), refused: false };
  }
}

/** Decode one input under the allocation guard; the escape reason, or null. */
export function replay(target: Target, input: Uint8Array, maxMs = 250): string | null {
  const guard = new AllocationGuard();
  warm(target);
  guard.limit = target.allocBound(input.length);
  const t0 = performance.now();
  guard.install();
  let r: ReturnType<typeof judge>;
  try {
    r = judge(target, input);
  } finally {
    guard.uninstall();
  }
  const ms = performance.now() - t0;
  if (r.why !== null) return r.why;
  const v = guard.violations[0];
  if (v !== undefined) return `allocated ${v.ctor}(${v.size}) for a ${input.length}-byte input (bound ${v.limit})`;
  if (ms > maxMs) return `took ${ms.toFixed(0)} ms (bound ${maxMs} ms)`;
  return null;
}

const warmed = new WeakSet<Target>();

/** Prepare a target and run its valid encodings once outside the guard: lazy caches are not the input's. */
function warm(target: Target, rand = mulberry32(1)): void {
  if (warmed.has(target)) return;
  target.prepare(rand);
  for (let i = 0; i < 64; i++) judge(target, target.input(rand));
  warmed.add(target);
}

/** Run the fuzz loop. Deterministic for a given seed, input count and target list. */
export function runFuzz(o: FuzzOptions): FuzzResult {
  const maxMs = o.maxMs ?? 250;
  const maxEscapes = o.maxEscapes ?? 20;
  const rand = mulberry32(o.seed);
  const targets = o.targets;
  for (const t of targets) {
    warmed.delete(t);
    warm(t, mulberry32(o.seed ^ 0x5eed));
    t.prepare(rand);
  }
  const stats: Record<string, TargetStats> = {};
  for (const t of targets) stats[t.name] = { inputs: 0, decoded: 0, refused: 0, escapes: 0, ms: 0 };
  const escapes: Escape[] = [];
  const guard = new AllocationGuard();
  const t0 = performance.now();
  const inputs: Uint8Array[] = [];
  // Most inputs are refused with an error; capturing its stack was half the time of a decode.
  const stackLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return loop();
  } finally {
    Error.stackTraceLimit = stackLimit;
  }

  function loop(): FuzzResult {
    let done = 0;
    while (done < o.inputs && escapes.length < maxEscapes) {
      const n = Math.min(CHUNK, o.inputs - done);
      inputs.length = 0;
      for (let i = 0; i < n; i++) inputs.push(targets[(done + i) % targets.length]!.input(rand));
      // One install per chunk: the Proxies cost more to make than most decodes.
      let ran = n;
      guard.install();
      try {
        for (let i = 0; i < n; i++) {
          if (!step(done + i, inputs[i]!)) {
            ran = i + 1;
            break;
          }
        }
      } finally {
        guard.uninstall();
      }
      done += ran;
      o.onProgress?.(done);
    }
    return { inputs: done, ms: performance.now() - t0, escapes, stats, guardConstructions: guard.constructions };
  }

  /** Judge one input (the guard is installed); false once enough escaped. */
  function step(index: number, input: Uint8Array): boolean {
    {
      const ti = index % targets.length;
      const t = targets[ti]!;
      o.onInput?.(index, ti, input);
      const s = stats[t.name]!;
      guard.limit = t.allocBound(input.length);
      guard.violations.length = 0;
      const c0 = performance.now();
      const r = judge(t, input);
      const ms = performance.now() - c0;
      s.inputs++;
      s.ms += ms;
      let why = r.why;
      const v = guard.violations[0];
      if (why === null && v !== undefined)
        why = `allocated ${v.ctor}(${v.size}) for a ${input.length}-byte input (bound ${v.limit})`;
      if (why === null && ms > maxMs) why = replay(t, input, maxMs); // slow twice: an escape
      if (why !== null) {
        s.escapes++;
        guard.limit = Number.POSITIVE_INFINITY; // the report's own allocations are not the input's
        const e = { target: t.name, index, hex: hex(input), why };
        escapes.push(e);
        o.onEscape?.(e);
        if (escapes.length >= maxEscapes) return false;
      } else if (r.refused) s.refused++;
      else s.decoded++;
      return true;
    }
  }
}
