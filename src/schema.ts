/**
 * Hand-written readers with `zod/mini`'s API, for the schema kinds lanemux uses. A browser page that
 * only ever sees well-formed input then ships no zod at all: each reader accepts exactly what the
 * zod schema of the same shape accepts (with the same output and the same issue paths, and zod's
 * English messages for the issue kinds here), and {@link explain} loads zod itself (dynamic
 * `import()`) to give zod's own verdict and message on an input a reader refused. zod stays the
 * validator of record: `test/schema-parity.test.ts` compares every reader with its zod schema.
 *
 * The functions are typed as zod's (a type-only import, erased at build), so `output<typeof s>` and
 * the call sites read as they did with zod.
 *
 * @packageDocumentation
 */
import type * as zm from 'zod/mini';

type Zod = typeof zm;
type Key = PropertyKey;
type In = 'optional' | 'defaulted' | undefined;

/** One refusal: zod's issue shape, reduced to what lanemux reads. */
export interface Issue {
  readonly code: string;
  readonly path: Key[];
  readonly message: string;
  /** The unrecognized keys (`code: 'unrecognized_keys'`). */
  readonly keys?: string[];
  /** A check's refusal (zod's `continue`): later checks still run. */
  readonly continue?: boolean;
}

/** A refused parse: the issues, in zod's order. */
export class SchemaError extends Error {
  override readonly name = 'SchemaError';
  readonly issues: Issue[];
  constructor(issues: Issue[]) {
    super(issues.map((i) => i.message).join('; '));
    this.issues = issues;
  }
}

type Run = (v: unknown, p: Key[], out: Issue[]) => unknown;
type Build = (z: Zod) => zm.ZodMiniType;
interface Check {
  readonly run: (v: unknown, p: Key[], out: Issue[]) => void;
  readonly zod: (z: Zod) => zm.core.$ZodCheck<unknown>;
  /** zod's `when`: runs even after a refusal, when this holds (length checks: the value has a length). */
  readonly when?: (v: unknown) => boolean;
}

const aborted = (out: Issue[], from: number): boolean => {
  for (let i = from; i < out.length; i++) if (out[i]!.continue !== true) return true;
  return false;
};

/** A reader node: its parse, how to build the zod schema it mirrors, and its optionality (zod's `optin`/`optout`). */
class Schema {
  #zod: zm.ZodMiniType | undefined;
  readonly r: Run;
  readonly b: Build;
  readonly optin: In;
  readonly optout: 'optional' | undefined;
  readonly checks: readonly Check[];
  readonly shape: Record<string, Schema> | undefined;
  readonly strict: boolean | undefined;
  constructor(
    r: Run,
    b: Build,
    optin: In = undefined,
    optout: 'optional' | undefined = undefined,
    checks: readonly Check[] = [],
    shape?: Record<string, Schema>,
    strict?: boolean,
  ) {
    this.r = r;
    this.b = b;
    this.optin = optin;
    this.optout = optout;
    this.checks = checks;
    this.shape = shape;
    this.strict = strict;
  }
  check(...cs: Check[]): Schema {
    return new Schema(this.r, this.b, this.optin, this.optout, [...this.checks, ...cs], this.shape, this.strict);
  }
  run(v: unknown, p: Key[], out: Issue[]): unknown {
    const n = out.length;
    const o = this.r(v, p, out);
    for (const c of this.checks) if (c.when ? c.when(o) : !aborted(out, n)) c.run(o, p, out);
    return o;
  }
  safeParse(input: unknown): { success: true; data: unknown } | { success: false; error: SchemaError } {
    const out: Issue[] = [];
    const data = this.run(input, [], out);
    return out.length === 0 ? { success: true, data } : { success: false, error: new SchemaError(out) };
  }
  parse(input: unknown): unknown {
    const r = this.safeParse(input);
    if (!r.success) throw r.error;
    return r.data;
  }
  /** The zod schema this reader mirrors (built once). */
  toZod(z: Zod): zm.ZodMiniType {
    if (this.#zod === undefined) {
      const s = this.b(z);
      this.#zod = this.checks.length > 0 ? s.check(...this.checks.map((c) => c.zod(z))) : s;
    }
    return this.#zod;
  }
}

// --- zod's English messages (zod/locales `en`) for the issue kinds these readers raise ---

function typeName(v: unknown): string {
  if (typeof v === 'number') return Number.isNaN(v) ? 'NaN' : Number.isFinite(v) ? 'number' : String(v);
  if (typeof v !== 'object') return typeof v;
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  const proto = Object.getPrototypeOf(v) as unknown;
  const ctor = (v as { constructor?: { name?: string } }).constructor;
  return proto !== Object.prototype && 'constructor' in v && ctor ? String(ctor.name) : 'object';
}
const prim = (v: unknown): string => (typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? `"${v}"` : String(v));
const sized = (v: unknown): string | undefined =>
  typeof v === 'string' ? 'characters' : Array.isArray(v) ? 'items' : undefined;
const origin = (v: unknown): string => (typeof v === 'string' ? 'string' : Array.isArray(v) ? 'array' : typeof v);

function typeIssue(out: Issue[], p: Key[], expected: string, v: unknown): void {
  out.push({
    code: 'invalid_type',
    path: [...p],
    message: `Invalid input: expected ${expected}, received ${typeName(v)}`,
  });
}
function sizeIssue(
  out: Issue[],
  p: Key[],
  v: unknown,
  big: boolean,
  adj: string,
  bound: number | bigint,
  kind = origin(v),
): void {
  const unit = sized(v);
  const what = unit ? `${kind} to have ${adj}${bound} ${unit}` : `${kind} to be ${adj}${bound}`;
  out.push({
    code: big ? 'too_big' : 'too_small',
    path: [...p],
    message: `${big ? 'Too big' : 'Too small'}: expected ${what}`,
    // zod ends a union's search at an array's size refusal, not at a string's.
    continue: !Array.isArray(v),
  });
}
type Params = string | { readonly message?: string; readonly error?: unknown } | undefined;
const message = (params: Params, fallback: string): string =>
  typeof params === 'string'
    ? params
    : (params?.message ?? (typeof params?.error === 'string' ? params.error : undefined) ?? fallback);
const custom = (out: Issue[], p: Key[], text: string): void => {
  out.push({ code: 'custom', path: [...p], message: text, continue: true });
};

// --- types ---

const typed = (expected: string, ok: (v: unknown) => boolean, b: Build): Schema =>
  new Schema((v, p, out) => {
    if (!ok(v)) typeIssue(out, p, expected, v);
    return v;
  }, b);

/** `z.string()`. */
export const string = (() =>
  typed(
    'string',
    (v) => typeof v === 'string',
    (z) => z.string(),
  )) as unknown as typeof zm.string;
/** `z.number()`: finite numbers only. */
export const number = (() =>
  typed(
    'number',
    (v) => typeof v === 'number' && Number.isFinite(v),
    (z) => z.number(),
  )) as unknown as typeof zm.number;
/** `z.boolean()`. */
export const boolean = (() =>
  typed(
    'boolean',
    (v) => typeof v === 'boolean',
    (z) => z.boolean(),
  )) as unknown as typeof zm.boolean;
/** `z.bigint()`. */
export const bigint = (() =>
  typed(
    'bigint',
    (v) => typeof v === 'bigint',
    (z) => z.bigint(),
  )) as unknown as typeof zm.bigint;
/** `z.unknown()`. */
export const unknown = (() =>
  new Schema(
    (v) => v,
    (z) => z.unknown(),
  )) as unknown as typeof zm.unknown;

/** `z.custom(fn, params)`. */
export const custom_ = ((fn?: (v: unknown) => unknown, params?: Params) =>
  new Schema(
    (v, p, out) => {
      if (fn !== undefined && !fn(v)) custom(out, p, message(params, 'Invalid input'));
      return v;
    },
    (z) => z.custom(fn, params as never),
  )) as unknown as typeof zm.custom;
export { custom_ as custom };

/** `z.instanceof(C)`. */
export const instanceOf = ((C: abstract new (...a: never[]) => unknown) =>
  new Schema(
    (v, p, out) => {
      if (!(v instanceof C))
        out.push({
          code: 'invalid_type',
          path: [...p],
          message: `Invalid input: expected ${C.name}, received ${typeName(v)}`,
          continue: true,
        });
      return v;
    },
    (z) => z.instanceof(C as never),
  )) as unknown as typeof zm.instanceof;
export { instanceOf as instanceof };

const valueIssue = (values: readonly unknown[]): string =>
  values.length === 1
    ? `Invalid input: expected ${prim(values[0])}`
    : `Invalid option: expected one of ${values.map(prim).join('|')}`;
const oneOf = (values: readonly unknown[], b: Build): Schema =>
  new Schema((v, p, out) => {
    if (!values.includes(v)) out.push({ code: 'invalid_value', path: [...p], message: valueIssue(values) });
    return v;
  }, b);
/** `z.literal(value | values)`. */
export const literal = ((value: unknown, params?: Params) =>
  oneOf(Array.isArray(value) ? value : [value], (z) =>
    z.literal(value as never, params as never),
  )) as unknown as typeof zm.literal;
/** `z.enum(values)`. */
export const enum_ = ((values: readonly string[], params?: Params) =>
  oneOf(values, (z) => z.enum(values as never, params as never))) as unknown as typeof zm.enum;
export { enum_ as enum };

/** `z.optional(s)`. */
export const optional = ((s: Schema) =>
  new Schema(
    (v, p, out) => (v === undefined ? undefined : s.run(v, p, out)),
    (z) => z.optional(s.toZod(z)),
    'optional',
    'optional',
  )) as unknown as typeof zm.optional;

const clone = (d: unknown): unknown =>
  typeof d === 'function'
    ? (d as () => unknown)()
    : Array.isArray(d)
      ? [...d]
      : typeof d === 'object' && d !== null && Object.getPrototypeOf(d) === Object.prototype
        ? { ...d }
        : d;
/** `z._default(s, value)`: `undefined` becomes (a shallow copy of) `value`, not parsed further. */
export const _default = ((s: Schema, d: unknown) =>
  new Schema(
    (v, p, out) => (v === undefined ? clone(d) : s.run(v, p, out)),
    (z) => z._default(s.toZod(z), d as never),
    'defaulted',
  )) as unknown as typeof zm._default;

function objectOf(shape: Record<string, Schema>, strict: boolean): Schema {
  const keys = Object.keys(shape);
  return new Schema(
    (v, p, out) => {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) {
        typeIssue(out, p, 'object', v);
        return v;
      }
      const input = v as Record<string, unknown>;
      const res: Record<string, unknown> = {};
      for (const key of keys) {
        const s = shape[key]!;
        const present = key in input;
        if (!present && s.optout === 'optional' && s.optin === 'optional') continue;
        const issues: Issue[] = [];
        const o = s.run(input[key], [...p, key], issues);
        if (issues.length > 0) {
          if (s.optin !== undefined && s.optout === 'optional' && !present) continue;
          out.push(...issues);
        }
        if (!present && s.optin === undefined) {
          if (issues.length === 0)
            out.push({
              code: 'invalid_type',
              path: [...p, key],
              message: 'Invalid input: expected nonoptional, received undefined',
            });
          continue;
        }
        if (o !== undefined) res[key] = o;
        else if (present || (s.optin === 'defaulted' && s.optout !== 'optional')) res[key] = undefined;
      }
      if (strict) {
        const extra: string[] = [];
        for (const key in input) if (!(key in shape) || !Object.hasOwn(shape, key)) extra.push(key);
        if (extra.length > 0)
          out.push({
            code: 'unrecognized_keys',
            path: [...p],
            keys: extra,
            continue: true,
            message: `Unrecognized key${extra.length > 1 ? 's' : ''}: ${extra.map(prim).join(', ')}`,
          });
      }
      return res;
    },
    (z) => {
      const zs: Record<string, zm.ZodMiniType> = {};
      for (const key of keys) zs[key] = shape[key]!.toZod(z);
      return strict ? z.strictObject(zs) : z.object(zs);
    },
    undefined,
    undefined,
    [],
    shape,
    strict,
  );
}
/** `z.object(shape)`: unknown keys are dropped. */
export const object = ((shape: Record<string, Schema>) => objectOf(shape, false)) as unknown as typeof zm.object;
/** `z.strictObject(shape)`: unknown keys are refused. */
export const strictObject = ((shape: Record<string, Schema>) =>
  objectOf(shape, true)) as unknown as typeof zm.strictObject;
/** `z.extend(s, shape)`. */
export const extend = ((s: Schema, shape: Record<string, Schema>) =>
  objectOf({ ...s.shape, ...shape }, s.strict === true).check(...s.checks)) as unknown as typeof zm.extend;

/** `z.array(s)`. */
export const array = ((s: Schema) =>
  new Schema(
    (v, p, out) => {
      if (!Array.isArray(v)) {
        typeIssue(out, p, 'array', v);
        return v;
      }
      const res: unknown[] = new Array(v.length);
      for (let i = 0; i < v.length; i++) res[i] = s.run(v[i], [...p, i], out);
      return res;
    },
    (z) => z.array(s.toZod(z)),
  )) as unknown as typeof zm.array;

/** `z.record(key, value)`: a plain object, each key and value read. */
export const record = ((k: Schema, s: Schema) =>
  new Schema(
    (v, p, out) => {
      const proto = typeof v === 'object' && v !== null ? (Object.getPrototypeOf(v) as unknown) : undefined;
      if (typeof v !== 'object' || v === null || Array.isArray(v) || (proto !== Object.prototype && proto !== null)) {
        typeIssue(out, p, 'record', v);
        return v;
      }
      const input = v as Record<string, unknown>;
      const res: Record<string, unknown> = {};
      for (const key of Object.keys(input)) {
        if (key === '__proto__') continue;
        const ki: Issue[] = [];
        const kk = k.run(key, [], ki);
        if (ki.length > 0) {
          out.push({ code: 'invalid_key', path: [...p, key], message: 'Invalid key in record' });
          continue;
        }
        res[kk as string] = s.run(input[key], [...p, key], out);
      }
      return res;
    },
    (z) => z.record(k.toZod(z) as never, s.toZod(z)),
  )) as unknown as typeof zm.record;

/** `z.union(options)`: the first option that accepts; else the one that matched the type, else `invalid_union`. */
export const union = ((options: readonly Schema[]) =>
  new Schema(
    (v, p, out) => {
      const tries: Array<{ o: unknown; issues: Issue[] }> = [];
      for (const s of options) {
        const issues: Issue[] = [];
        const o = s.run(v, p, issues);
        if (issues.length === 0) return o;
        tries.push({ o, issues });
      }
      const live = tries.filter((t) => !aborted(t.issues, 0));
      if (live.length === 1) {
        out.push(...live[0]!.issues);
        return live[0]!.o;
      }
      out.push({ code: 'invalid_union', path: [...p], message: 'Invalid input' });
      return v;
    },
    (z) => z.union(options.map((s) => s.toZod(z)) as never),
    options.some((o) => o.optin === 'defaulted')
      ? 'defaulted'
      : options.some((o) => o.optin !== undefined)
        ? 'optional'
        : undefined,
    options.some((o) => o.optout === 'optional') ? 'optional' : undefined,
  )) as unknown as typeof zm.union;

/** `z.transform(fn)`. */
export const transform = ((fn: (v: unknown) => unknown) =>
  new Schema(
    (v) => fn(v),
    (z) => z.transform(fn),
  )) as unknown as typeof zm.transform;

/** `z.pipe(a, b)`: `b` reads what `a` gave, if `a` accepted. */
export const pipe = ((a: Schema, b: Schema) =>
  new Schema(
    (v, p, out) => {
      const n = out.length;
      const o = a.run(v, p, out);
      return out.length > n ? o : b.run(o, p, out);
    },
    (z) => z.pipe(a.toZod(z), b.toZod(z) as never),
    a.optin,
    b.optout,
  )) as unknown as typeof zm.pipe;

// --- checks ---

const check = (run: Check['run'], zod: Check['zod'], when?: Check['when']): Check =>
  when === undefined ? { run, zod } : { run, zod, when };
const hasLength = (v: unknown): boolean =>
  v !== null && v !== undefined && (v as { length?: unknown }).length !== undefined;
const cmp = (v: unknown): v is number | bigint => typeof v === 'number' || typeof v === 'bigint';

/** `z.gte(n)`. */
export const gte = ((n: number | bigint) =>
  check(
    (v, p, out) => {
      if (cmp(v) && !(v >= n)) sizeIssue(out, p, v, false, '>=', n);
    },
    (z) => z.gte(n) as never,
  )) as unknown as typeof zm.gte;
/** `z.gt(n)`. */
export const gt = ((n: number | bigint) =>
  check(
    (v, p, out) => {
      if (cmp(v) && !(v > n)) sizeIssue(out, p, v, false, '>', n);
    },
    (z) => z.gt(n) as never,
  )) as unknown as typeof zm.gt;
/** `z.lte(n)`. */
export const lte = ((n: number | bigint) =>
  check(
    (v, p, out) => {
      if (cmp(v) && !(v <= n)) sizeIssue(out, p, v, true, '<=', n);
    },
    (z) => z.lte(n) as never,
  )) as unknown as typeof zm.lte;
/** `z.int()`: a safe integer. */
export const int = (() =>
  check(
    (v, p, out) => {
      if (typeof v !== 'number') return;
      if (!Number.isInteger(v))
        out.push({
          code: 'invalid_type',
          path: [...p],
          message: 'Invalid input: expected int, received number',
        });
      else if (v > Number.MAX_SAFE_INTEGER) sizeIssue(out, p, v, true, '<=', Number.MAX_SAFE_INTEGER, 'int');
      else if (v < Number.MIN_SAFE_INTEGER) sizeIssue(out, p, v, false, '>=', Number.MIN_SAFE_INTEGER, 'int');
    },
    (z) => z.int() as never,
  )) as unknown as typeof zm.int;
/** `z.minLength(n)` (strings and arrays). */
export const minLength = ((n: number, params?: Params) =>
  check(
    (v, p, out) => {
      const len = (v as { length?: unknown } | null)?.length;
      if (typeof len === 'number' && len < n) {
        if (params !== undefined) custom(out, p, message(params, ''));
        else sizeIssue(out, p, v, false, '>=', n);
      }
    },
    (z) => z.minLength(n, params as never) as never,
    hasLength,
  )) as unknown as typeof zm.minLength;
/** `z.maxLength(n)` (strings and arrays). */
export const maxLength = ((n: number, params?: Params) =>
  check(
    (v, p, out) => {
      const len = (v as { length?: unknown } | null)?.length;
      if (typeof len === 'number' && len > n) {
        if (params !== undefined) custom(out, p, message(params, ''));
        else sizeIssue(out, p, v, true, '<=', n);
      }
    },
    (z) => z.maxLength(n, params as never) as never,
    hasLength,
  )) as unknown as typeof zm.maxLength;

const format = (ok: (s: string) => boolean, text: string, params: Params, zod: Check['zod']): Check =>
  check((v, p, out) => {
    if (typeof v === 'string' && !ok(v))
      out.push({ code: 'invalid_format', path: [...p], message: message(params, text), continue: true });
  }, zod);
/** `z.regex(re, params)`. */
export const regex = ((re: RegExp, params?: Params) =>
  format(
    (s) => {
      re.lastIndex = 0;
      return re.test(s);
    },
    `Invalid string: must match pattern ${re}`,
    params,
    (z) => z.regex(re, params as never) as never,
  )) as unknown as typeof zm.regex;
/** `z.startsWith(prefix, params)`. */
export const startsWith = ((prefix: string, params?: Params) =>
  format(
    (s) => s.startsWith(prefix),
    `Invalid string: must start with "${prefix}"`,
    params,
    (z) => z.startsWith(prefix, params as never) as never,
  )) as unknown as typeof zm.startsWith;
/** `z.includes(part, params)`. */
export const includes = ((part: string, params?: Params) =>
  format(
    (s) => s.includes(part),
    `Invalid string: must include "${part}"`,
    params,
    (z) => z.includes(part, params as never) as never,
  )) as unknown as typeof zm.includes;
/** `z.refine(fn, params)`. */
export const refine = ((fn: (v: never) => unknown, params?: Params) =>
  check(
    (v, p, out) => {
      if (!fn(v as never)) custom(out, p, message(params, 'Invalid input'));
    },
    (z) => z.refine(fn as (v: unknown) => unknown, params as never) as never,
  )) as unknown as typeof zm.refine;

// --- errors ---

function dotPath(path: readonly Key[]): string {
  let s = '';
  for (const seg of path) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (typeof seg === 'symbol') s += `[${JSON.stringify(String(seg))}]`;
    else if (/[^\w$]/.test(seg)) s += `[${JSON.stringify(seg)}]`;
    else s += s ? `.${seg}` : seg;
  }
  return s;
}

/** `z.prettifyError(error)`: one `✖ message` line per issue (shortest path first), `→ at path` under it. */
export function prettifyError(error: { readonly issues: readonly Issue[] }): string {
  const lines: string[] = [];
  for (const issue of [...error.issues].sort((a, b) => a.path.length - b.path.length)) {
    lines.push(`✖ ${issue.message}`);
    if (issue.path.length > 0) lines.push(`  → at ${dotPath(issue.path)}`);
  }
  return lines.join('\n');
}

/**
 * zod's own verdict on `input`: loads `zod/mini` and its English messages (once, on the first call)
 * and parses with the zod schema `schema` mirrors. For an input a reader refused, to explain it.
 */
export async function explain(
  schema: unknown,
  input: unknown,
): Promise<{ success: true; data: unknown } | { success: false; error: zm.core.$ZodError; message: string }> {
  // English alone: `zod/locales` would bring every language into the chunk (~60 kB brotli).
  const [z, { default: en }] = await Promise.all([import('zod/mini'), import('zod/v4/locales/en.js')]);
  const r = (schema as Schema).toZod(z).safeParse(input, { error: en().localeError });
  return r.success
    ? { success: true, data: r.data }
    : { success: false, error: r.error, message: z.prettifyError(r.error) };
}

/** The zod schema a reader mirrors, built with the `zod/mini` module given (for tests comparing them). */
export const toZod = (schema: unknown, z: Zod): zm.ZodMiniType => (schema as Schema).toZod(z);

export type { ZodMiniNumber, ZodMiniString, ZodMiniType, input, output } from 'zod/mini';
