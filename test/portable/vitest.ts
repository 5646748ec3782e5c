// A small vitest-compatible test API (describe/it/test/expect/hooks and the matchers lanemux's
// shared suites use), so the same suite files run under `deno test` (mapped in for `vitest` by the
// root deno.json) and in a browser page. Browser-safe: no `node:` imports, no Node globals.
//
// Hosts:
// - Deno: each `it` registers one `Deno.test` named `describe > … > it` at load time (sanitizers off:
//   lanemux timers are unref'd and sockets close in afterEach, after Deno's per-test check would run).
// - Anywhere else (a browser page): tests are collected; call `runCollected()` to run them in order.
// Semantics kept from vitest: hooks of enclosing describes apply (beforeEach outer→inner, afterEach
// inner→outer), a per-test timeout (third argument of `it`, default 30 s as in vite.config.ts), and
// failing `expect`s throw an Error whose message says what was expected.

type HookFn = () => unknown;
type TestFn = () => unknown;

interface Suite {
  readonly name: string;
  readonly parent: Suite | undefined;
  readonly beforeAll: HookFn[];
  readonly afterAll: HookFn[];
  readonly beforeEach: HookFn[];
  readonly afterEach: HookFn[];
  /** Tests and suites in declaration order. */
  readonly children: Array<Suite | TestCase>;
  started: boolean;
  finished: boolean;
}

interface TestCase {
  readonly name: string;
  readonly fn: TestFn;
  readonly timeoutMs: number;
  readonly suite: Suite;
}

/** Outcome of one test in {@link runCollected}. */
export interface TestResult {
  readonly name: string;
  readonly passed: boolean;
  readonly error?: string;
  readonly durationMs: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

function newSuite(name: string, parent: Suite | undefined): Suite {
  return {
    name,
    parent,
    beforeAll: [],
    afterAll: [],
    beforeEach: [],
    afterEach: [],
    children: [],
    started: false,
    finished: false,
  };
}

const root = newSuite('', undefined);
let current = root;

interface DenoTestHost {
  test(options: {
    name: string;
    fn: () => Promise<void>;
    sanitizeOps: boolean;
    sanitizeResources: boolean;
    sanitizeExit: boolean;
  }): void;
}
const denoHost = (globalThis as { Deno?: DenoTestHost }).Deno;

function fullName(t: TestCase): string {
  const parts: string[] = [t.name];
  for (let s: Suite | undefined = t.suite; s !== undefined && s !== root; s = s.parent) parts.unshift(s.name);
  return parts.join(' > ');
}

function chain(s: Suite): Suite[] {
  const out: Suite[] = [];
  for (let x: Suite | undefined = s; x !== undefined; x = x.parent) out.unshift(x);
  return out;
}

/** The last test (depth-first) under a suite: when it has run, the suite's afterAll hooks run. */
function lastTest(s: Suite): TestCase | undefined {
  for (let i = s.children.length - 1; i >= 0; i--) {
    const c = s.children[i] as Suite | TestCase;
    if ('fn' in c) return c;
    const t = lastTest(c);
    if (t !== undefined) return t;
  }
  return undefined;
}

async function withTimeout(fn: () => unknown, ms: number, what: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out in ${ms} ms`)), ms);
  });
  try {
    await Promise.race([Promise.resolve().then(fn), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Run one test with the hooks of its enclosing suites. Throws the first error. */
async function runTest(t: TestCase): Promise<void> {
  const suites = chain(t.suite);
  let error: unknown;
  let failed = false;
  const attempt = async (fn: () => unknown, ms: number, what: string): Promise<void> => {
    try {
      await withTimeout(fn, ms, what);
    } catch (e) {
      if (!failed) {
        failed = true;
        error = e;
      }
    }
  };
  for (const s of suites) {
    if (s.started) continue;
    s.started = true;
    for (const h of s.beforeAll) await attempt(h, DEFAULT_TIMEOUT_MS, 'beforeAll hook');
  }
  if (!failed) {
    for (const s of suites)
      for (const h of s.beforeEach) if (!failed) await attempt(h, DEFAULT_TIMEOUT_MS, 'beforeEach hook');
  }
  if (!failed) await attempt(t.fn, t.timeoutMs, `test "${t.name}"`);
  // afterEach always runs (it releases sockets), innermost first.
  for (const s of [...suites].reverse())
    for (const h of [...s.afterEach].reverse()) await attempt(h, DEFAULT_TIMEOUT_MS, 'afterEach hook');
  for (const s of [...suites].reverse()) {
    if (s.finished || lastTest(s) !== t) continue;
    s.finished = true;
    for (const h of [...s.afterAll].reverse()) await attempt(h, DEFAULT_TIMEOUT_MS, 'afterAll hook');
  }
  if (failed) throw error;
}

function addTest(name: string, fn: TestFn, timeoutMs: number | undefined): void {
  const t: TestCase = { name, fn, timeoutMs: timeoutMs ?? DEFAULT_TIMEOUT_MS, suite: current };
  current.children.push(t);
  if (denoHost !== undefined) {
    denoHost.test({
      name: fullName(t),
      fn: () => runTest(t),
      sanitizeOps: false,
      sanitizeResources: false,
      sanitizeExit: false,
    });
  }
}

/** Declare a group of tests; its hooks apply to every test inside. */
export function describe(name: string, body: () => void): void {
  const s = newSuite(name, current);
  current.children.push(s);
  const outer = current;
  current = s;
  try {
    const r = body() as unknown;
    if (r instanceof Promise) throw new Error(`describe("${name}") must be synchronous`);
  } finally {
    current = outer;
  }
}

/** Declare a test. `timeoutMs` defaults to 30,000 ms (or an options object `{ timeout }`). */
export function it(name: string, fn: TestFn, timeout?: number | { timeout?: number }): void {
  addTest(name, fn, typeof timeout === 'number' ? timeout : timeout?.timeout);
}

export const test = it;

export function beforeAll(fn: HookFn): void {
  current.beforeAll.push(fn);
}
export function afterAll(fn: HookFn): void {
  current.afterAll.push(fn);
}
export function beforeEach(fn: HookFn): void {
  current.beforeEach.push(fn);
}
export function afterEach(fn: HookFn): void {
  current.afterEach.push(fn);
}

/**
 * Run every collected test in declaration order (hosts without `Deno.test`, e.g. a browser page).
 * `filter` keeps tests whose full name contains it. Never throws; failures are in the results.
 */
export async function runCollected(
  options: { filter?: string; onResult?: (r: TestResult) => void } = {},
): Promise<{ passed: number; failed: number; results: TestResult[] }> {
  const all: TestCase[] = [];
  const walk = (s: Suite): void => {
    for (const c of s.children) {
      if ('fn' in c) all.push(c);
      else walk(c);
    }
  };
  walk(root);
  const results: TestResult[] = [];
  for (const t of all) {
    const name = fullName(t);
    if (options.filter !== undefined && !name.includes(options.filter)) continue;
    const t0 = performance.now();
    let r: TestResult;
    try {
      await runTest(t);
      r = { name, passed: true, durationMs: performance.now() - t0 };
    } catch (e) {
      r = {
        name,
        passed: false,
        error: e instanceof Error ? `${e.message}\n${e.stack ?? ''}` : String(e),
        durationMs: performance.now() - t0,
      };
    }
    results.push(r);
    options.onResult?.(r);
  }
  return { passed: results.filter((r) => r.passed).length, failed: results.filter((r) => !r.passed).length, results };
}

export { expect } from './expect.ts';
