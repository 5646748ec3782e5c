// `expect` of the portable vitest shim: the matchers lanemux's shared suites use, with vitest's
// semantics (toEqual ignores undefined properties, toMatchObject is a recursive subset, asymmetric
// matchers such as expect.stringMatching, `.not`, `.resolves`, `.rejects`). Browser-safe.

/** An asymmetric matcher (`expect.any(Number)`, `expect.stringMatching(/x/)`, ...). */
export interface Asymmetric {
  readonly asymmetricMatch: (actual: unknown) => boolean;
  readonly toString: () => string;
}

function isAsymmetric(v: unknown): v is Asymmetric {
  return (
    typeof v === 'object' && v !== null && typeof (v as { asymmetricMatch?: unknown }).asymmetricMatch === 'function'
  );
}

// ───────────────────────── formatting ─────────────────────────

export function format(v: unknown, depth = 0, seen: Set<unknown> = new Set()): string {
  if (isAsymmetric(v)) return v.toString();
  if (typeof v === 'string') return JSON.stringify(v.length > 200 ? `${v.slice(0, 200)}…` : v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'function') return `[Function ${v.name || 'anonymous'}]`;
  if (typeof v === 'symbol') return v.toString();
  if (v === null || typeof v !== 'object') return String(v);
  if (seen.has(v)) return '[Circular]';
  if (depth > 4) return Array.isArray(v) ? '[Array]' : '[Object]';
  seen.add(v);
  try {
    if (v instanceof Error) {
      const code = (v as { code?: unknown }).code;
      return `${v.name}${code !== undefined ? `[${String(code)}]` : ''}(${JSON.stringify(v.message)})`;
    }
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      const a = Array.from(v as unknown as ArrayLike<number | bigint>);
      return `${v.constructor.name}(${a.length}) [${a.slice(0, 16).map(String).join(', ')}${a.length > 16 ? ', …' : ''}]`;
    }
    if (Array.isArray(v)) {
      const items = v.slice(0, 20).map((x) => format(x, depth + 1, seen));
      return `[${items.join(', ')}${v.length > 20 ? `, … (${v.length} items)` : ''}]`;
    }
    if (v instanceof Map)
      return `Map(${v.size}) {${[...v]
        .slice(0, 10)
        .map(([k, x]) => `${format(k, depth + 1, seen)} => ${format(x, depth + 1, seen)}`)
        .join(', ')}}`;
    if (v instanceof Set)
      return `Set(${v.size}) {${[...v]
        .slice(0, 10)
        .map((x) => format(x, depth + 1, seen))
        .join(', ')}}`;
    if (v instanceof Date) return `Date(${v.toISOString()})`;
    if (v instanceof RegExp) return String(v);
    const keys = Object.keys(v);
    const name = v.constructor !== undefined && v.constructor !== Object ? `${v.constructor.name} ` : '';
    return `${name}{${keys
      .slice(0, 20)
      .map((k) => `${k}: ${format((v as Record<string, unknown>)[k], depth + 1, seen)}`)
      .join(', ')}${keys.length > 20 ? ', …' : ''}}`;
  } finally {
    seen.delete(v);
  }
}

// ───────────────────────── equality ─────────────────────────

function definedKeys(o: object): string[] {
  return Object.keys(o).filter((k) => (o as Record<string, unknown>)[k] !== undefined);
}

/** vitest `toEqual`: recursive, undefined properties ignored, asymmetric matchers honoured. */
export function equals(a: unknown, b: unknown, strict = false): boolean {
  if (isAsymmetric(b)) return b.asymmetricMatch(a);
  if (isAsymmetric(a)) return a.asymmetricMatch(b);
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (strict && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date || b instanceof Date)
    return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  if (a instanceof RegExp || b instanceof RegExp)
    return a instanceof RegExp && b instanceof RegExp && String(a) === String(b);
  if (a instanceof Error || b instanceof Error) {
    if (!(a instanceof Error && b instanceof Error) || a.message !== b.message || a.name !== b.name) return false;
  }
  if (a instanceof ArrayBuffer || b instanceof ArrayBuffer) {
    return a instanceof ArrayBuffer && b instanceof ArrayBuffer && equals(new Uint8Array(a), new Uint8Array(b), strict);
  }
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.constructor !== b.constructor) return false;
    const x = a as unknown as ArrayLike<unknown>;
    const y = b as unknown as ArrayLike<unknown>;
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) return false;
    return true;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!equals(a[i], b[i], strict)) return false;
    return true;
  }
  if (a instanceof Map || b instanceof Map) {
    if (!(a instanceof Map && b instanceof Map) || a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !equals(v, b.get(k), strict)) return false;
    return true;
  }
  if (a instanceof Set || b instanceof Set) {
    if (!(a instanceof Set && b instanceof Set) || a.size !== b.size) return false;
    const rest = [...b];
    for (const v of a) {
      const i = rest.findIndex((w) => equals(v, w, strict));
      if (i < 0) return false;
      rest.splice(i, 1);
    }
    return true;
  }
  const ka = strict ? Object.keys(a) : definedKeys(a);
  const kb = strict ? Object.keys(b) : definedKeys(b);
  if (ka.length !== kb.length) return false;
  for (const k of kb) {
    if (!equals((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], strict)) return false;
  }
  return true;
}

/** vitest `toMatchObject`: every property of `expected` matches (recursively) on `actual`. */
export function matchesObject(actual: unknown, expected: unknown): boolean {
  if (isAsymmetric(expected)) return expected.asymmetricMatch(actual);
  if (typeof expected !== 'object' || expected === null) return equals(actual, expected);
  if (typeof actual !== 'object' || actual === null) return false;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return false;
    return expected.every((e, i) => matchesObject(actual[i], e));
  }
  if (
    expected instanceof Date ||
    expected instanceof RegExp ||
    ArrayBuffer.isView(expected) ||
    expected instanceof Map ||
    expected instanceof Set
  ) {
    return equals(actual, expected);
  }
  for (const k of Object.keys(expected)) {
    if (!(k in actual)) return false;
    if (!matchesObject((actual as Record<string, unknown>)[k], (expected as Record<string, unknown>)[k])) return false;
  }
  return true;
}

// ───────────────────────── matchers ─────────────────────────

interface Outcome {
  readonly pass: boolean;
  /** Says what was expected, phrased for the non-negated form ("expected X to be Y"). */
  readonly message: string;
}

function thrownMatches(thrown: unknown, expected: unknown): Outcome {
  const msg = thrown instanceof Error ? thrown.message : String(thrown);
  if (expected === undefined) return { pass: true, message: `expected to throw` };
  if (typeof expected === 'string')
    return { pass: msg.includes(expected), message: `expected error ${format(thrown)} to include ${format(expected)}` };
  if (expected instanceof RegExp)
    return { pass: expected.test(msg), message: `expected error ${format(thrown)} to match ${String(expected)}` };
  if (typeof expected === 'function')
    return {
      pass: thrown instanceof (expected as new (...a: never[]) => unknown),
      message: `expected error ${format(thrown)} to be an instance of ${(expected as { name: string }).name}`,
    };
  if (expected instanceof Error)
    return {
      pass: msg === expected.message,
      message: `expected error ${format(thrown)} to have message ${format(expected.message)}`,
    };
  return {
    pass: matchesObject(thrown, expected),
    message: `expected error ${format(thrown)} to match ${format(expected)}`,
  };
}

const matchers = {
  toBe: (a: unknown, e: unknown): Outcome => ({
    pass: Object.is(a, e),
    message: `expected ${format(a)} to be ${format(e)}`,
  }),
  toEqual: (a: unknown, e: unknown): Outcome => ({
    pass: equals(a, e),
    message: `expected ${format(a)} to equal ${format(e)}`,
  }),
  toStrictEqual: (a: unknown, e: unknown): Outcome => ({
    pass: equals(a, e, true),
    message: `expected ${format(a)} to strictly equal ${format(e)}`,
  }),
  toMatchObject: (a: unknown, e: unknown): Outcome => ({
    pass: matchesObject(a, e),
    message: `expected ${format(a)} to match object ${format(e)}`,
  }),
  toBeDefined: (a: unknown): Outcome => ({ pass: a !== undefined, message: `expected ${format(a)} to be defined` }),
  toBeUndefined: (a: unknown): Outcome => ({ pass: a === undefined, message: `expected ${format(a)} to be undefined` }),
  toBeNull: (a: unknown): Outcome => ({ pass: a === null, message: `expected ${format(a)} to be null` }),
  toBeTruthy: (a: unknown): Outcome => ({ pass: Boolean(a), message: `expected ${format(a)} to be truthy` }),
  toBeFalsy: (a: unknown): Outcome => ({ pass: !a, message: `expected ${format(a)} to be falsy` }),
  toBeNaN: (a: unknown): Outcome => ({ pass: Number.isNaN(a), message: `expected ${format(a)} to be NaN` }),
  toBeGreaterThan: (a: unknown, e: unknown): Outcome => ({
    pass: (a as number) > (e as number),
    message: `expected ${format(a)} to be greater than ${format(e)}`,
  }),
  toBeGreaterThanOrEqual: (a: unknown, e: unknown): Outcome => ({
    pass: (a as number) >= (e as number),
    message: `expected ${format(a)} to be greater than or equal to ${format(e)}`,
  }),
  toBeLessThan: (a: unknown, e: unknown): Outcome => ({
    pass: (a as number) < (e as number),
    message: `expected ${format(a)} to be less than ${format(e)}`,
  }),
  toBeLessThanOrEqual: (a: unknown, e: unknown): Outcome => ({
    pass: (a as number) <= (e as number),
    message: `expected ${format(a)} to be less than or equal to ${format(e)}`,
  }),
  toBeCloseTo: (a: unknown, e: unknown, digits: unknown = 2): Outcome => ({
    pass: Math.abs((a as number) - (e as number)) < 10 ** -(digits as number) / 2,
    message: `expected ${format(a)} to be close to ${format(e)} (${String(digits)} digits)`,
  }),
  toBeInstanceOf: (a: unknown, e: unknown): Outcome => ({
    pass: a instanceof (e as new (...x: never[]) => unknown),
    message: `expected ${format(a)} to be an instance of ${(e as { name?: string }).name ?? '?'}`,
  }),
  toBeTypeOf: (a: unknown, e: unknown): Outcome => ({
    pass: typeof a === e,
    message: `expected ${format(a)} to be of type ${String(e)}`,
  }),
  toContain: (a: unknown, e: unknown): Outcome => ({
    pass:
      typeof a === 'string'
        ? a.includes(e as string)
        : a !== null &&
          typeof a === 'object' &&
          Symbol.iterator in a &&
          [...(a as Iterable<unknown>)].some((x) => Object.is(x, e)),
    message: `expected ${format(a)} to contain ${format(e)}`,
  }),
  toContainEqual: (a: unknown, e: unknown): Outcome => ({
    pass: [...(a as Iterable<unknown>)].some((x) => equals(x, e)),
    message: `expected ${format(a)} to contain an item equal to ${format(e)}`,
  }),
  toHaveLength: (a: unknown, e: unknown): Outcome => ({
    pass: (a as { length?: unknown } | null)?.length === e,
    message: `expected ${format(a)} to have length ${format(e)}`,
  }),
  toHaveProperty: (a: unknown, path: unknown, ...value: unknown[]): Outcome => {
    let v: unknown = a;
    let found = true;
    for (const k of String(path).split('.')) {
      if (v === null || v === undefined || !(k in Object(v))) {
        found = false;
        break;
      }
      v = (v as Record<string, unknown>)[k];
    }
    const pass = found && (value.length === 0 || equals(v, value[0]));
    return {
      pass,
      message: `expected ${format(a)} to have property ${String(path)}${value.length > 0 ? ` = ${format(value[0])}` : ''}`,
    };
  },
  toMatch: (a: unknown, e: unknown): Outcome => ({
    pass: typeof a === 'string' && (e instanceof RegExp ? e.test(a) : a.includes(e as string)),
    message: `expected ${format(a)} to match ${e instanceof RegExp ? String(e) : format(e)}`,
  }),
  toThrow: (a: unknown, e?: unknown): Outcome => {
    if (typeof a !== 'function') return { pass: false, message: `expected a function, got ${format(a)}` };
    try {
      (a as () => unknown)();
    } catch (thrown) {
      return thrownMatches(thrown, e);
    }
    return { pass: false, message: `expected the function to throw${e === undefined ? '' : ` ${format(e)}`}` };
  },
};

type MatcherName = keyof typeof matchers;
type Rest<F> = F extends (a: unknown, ...rest: infer R) => Outcome ? R : never;

/** The assertion object returned by `expect(actual)`. */
export type Assertion = { [K in MatcherName]: (...args: Rest<(typeof matchers)[K]>) => void } & {
  readonly not: Assertion;
  readonly resolves: AsyncAssertion;
  readonly rejects: AsyncAssertion;
};

/** `expect(p).resolves` / `.rejects`: every matcher returns a promise. */
export type AsyncAssertion = { [K in MatcherName]: (...args: Rest<(typeof matchers)[K]>) => Promise<void> } & {
  readonly not: AsyncAssertion;
};

class AssertionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AssertionError';
  }
}

function check(o: Outcome, negate: boolean, label: string | undefined): void {
  if (o.pass === negate) {
    const text = negate ? o.message.replace(/^expected (.*?) to /, 'expected $1 not to ') : o.message;
    throw new AssertionError(label === undefined ? text : `${label}: ${text}`);
  }
}

function makeAssertion(actual: unknown, negate: boolean, label: string | undefined): Assertion {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(matchers) as MatcherName[]) {
    out[name] = (...args: unknown[]) =>
      check((matchers[name] as (a: unknown, ...r: unknown[]) => Outcome)(actual, ...args), negate, label);
  }
  Object.defineProperty(out, 'not', { get: () => makeAssertion(actual, !negate, label) });
  Object.defineProperty(out, 'resolves', { get: () => makeAsync(actual, 'resolves', false, label) });
  Object.defineProperty(out, 'rejects', { get: () => makeAsync(actual, 'rejects', false, label) });
  return out as Assertion;
}

function makeAsync(
  actual: unknown,
  mode: 'resolves' | 'rejects',
  negate: boolean,
  label: string | undefined,
): AsyncAssertion {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(matchers) as MatcherName[]) {
    out[name] = async (...args: unknown[]) => {
      if (!(actual instanceof Promise) && typeof (actual as { then?: unknown } | null)?.then !== 'function') {
        throw new AssertionError(
          `${label === undefined ? '' : `${label}: `}expected a promise for .${mode}, got ${format(actual)}`,
        );
      }
      let value: unknown;
      try {
        value = await actual;
      } catch (reason) {
        if (mode === 'resolves')
          throw new AssertionError(
            `${label === undefined ? '' : `${label}: `}expected the promise to resolve, it rejected with ${format(reason)}`,
          );
        if (name === 'toThrow') return check(thrownMatches(reason, args[0]), negate, label);
        return check((matchers[name] as (a: unknown, ...r: unknown[]) => Outcome)(reason, ...args), negate, label);
      }
      if (mode === 'rejects')
        throw new AssertionError(
          `${label === undefined ? '' : `${label}: `}expected the promise to reject, it resolved with ${format(value)}`,
        );
      return check((matchers[name] as (a: unknown, ...r: unknown[]) => Outcome)(value, ...args), negate, label);
    };
  }
  Object.defineProperty(out, 'not', { get: () => makeAsync(actual, mode, !negate, label) });
  return out as AsyncAssertion;
}

function asymmetric(description: string, match: (actual: unknown) => boolean): Asymmetric {
  return { asymmetricMatch: match, toString: () => description };
}

/** `expect(actual, message?)` plus the asymmetric matchers vitest offers on `expect`. */
export const expect = Object.assign(
  (actual: unknown, message?: string): Assertion => makeAssertion(actual, false, message),
  {
    anything: (): Asymmetric => asymmetric('Anything', (a) => a !== null && a !== undefined),
    any: (ctor: unknown): Asymmetric =>
      asymmetric(`Any<${(ctor as { name?: string }).name ?? '?'}>`, (a) => {
        if (ctor === Number) return typeof a === 'number' || a instanceof Number;
        if (ctor === String) return typeof a === 'string' || a instanceof String;
        if (ctor === Boolean) return typeof a === 'boolean' || a instanceof Boolean;
        if (ctor === BigInt) return typeof a === 'bigint';
        if (ctor === Function) return typeof a === 'function';
        if (ctor === Object) return typeof a === 'object' && a !== null;
        return a instanceof (ctor as new (...x: never[]) => unknown);
      }),
    stringMatching: (re: RegExp | string): Asymmetric =>
      asymmetric(
        `StringMatching ${String(re)}`,
        (a) => typeof a === 'string' && (typeof re === 'string' ? a.includes(re) : re.test(a)),
      ),
    stringContaining: (s: string): Asymmetric =>
      asymmetric(`StringContaining ${JSON.stringify(s)}`, (a) => typeof a === 'string' && a.includes(s)),
    objectContaining: (o: object): Asymmetric =>
      asymmetric(`ObjectContaining ${format(o)}`, (a) => matchesObject(a, o)),
    arrayContaining: (items: unknown[]): Asymmetric =>
      asymmetric(
        `ArrayContaining ${format(items)}`,
        (a) => Array.isArray(a) && items.every((i) => a.some((x) => equals(x, i))),
      ),
  },
);
