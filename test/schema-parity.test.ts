/**
 * The hand-written readers (src/schema.ts) accept exactly what zod accepts: for every schema below,
 * on a table of valid and invalid inputs and on random values, the reader and the zod schema it
 * mirrors agree on success, on the output, and on the issue paths (and on the messages for the
 * issue kinds the readers raise).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { en } from 'zod/locales';
import * as zm from 'zod/mini';
import { nodeDiscoverySchema } from '../src/stream/discovery-options.ts';
import { resumeSchema } from '../src/stream/resume-options.ts';
import { ticketSchema } from '../src/stream/ticket.ts';
import { tcpOptionsSchema, wsServerOptionsSchema } from '../src/adapters/socket-options.ts';
import { readErrorBody } from '../src/messenger/envelope.ts';
import { readHello } from '../src/transport/hello.ts';
import * as z from '../src/schema.ts';
import { int, num, str } from '../src/validate.ts';

const SCHEMAS: Record<string, unknown> = {
  string: str(5, 1),
  int: int(0, 10),
  num: num(-1, 1),
  gt: z.number().check(z.gt(0)),
  bigint: z.bigint().check(z.gte(0n), z.lte(100n)),
  boolean: z.boolean(),
  literal: z.literal('a'),
  literals: z.literal(['a', 1]),
  enum: z.enum(['x', 'y']),
  regex: z.string().check(z.regex(/^[a-f]+$/, 'hex')),
  startsWith: z.string().check(z.startsWith('/')),
  includes: z.string().check(z.includes('-', { message: 'needs a dash' })),
  array: z.array(str(3)).check(z.minLength(1), z.maxLength(2)),
  union: z.union([str(2), z.array(int(0)).check(z.maxLength(1))]),
  optional: z.optional(int(0)),
  default: z._default(z.array(int(0)), []),
  object: z.object({ a: str(3), b: z.optional(int(0)), c: z._default(z.boolean(), true), d: z.unknown() }),
  strict: z.strictObject({ a: z.optional(str(3)), n: z.optional(z.strictObject({ x: int(0) })) }),
  extend: z.extend(z.strictObject({ a: z.optional(str(3)) }), { b: z.optional(z.boolean()) }),
  record: z.record(z.string().check(z.regex(/^[a-z]+$/)), int(0)),
  custom: z.custom<number>((v) => typeof v === 'number' && v > 2, 'above two'),
  instanceof: z.instanceof(Uint8Array),
  refine: int(0).check(z.refine((v) => v % 2 === 0, 'even')),
  pipe: z.pipe(
    z.string().check(z.regex(/^\d+$/)),
    z.transform((s) => Number(s)),
  ),
  ticketSchema,
  nodeDiscoverySchema,
  resumeSchema,
  tcpOptionsSchema,
  wsServerOptionsSchema,
};

const TABLE: unknown[] = [
  undefined,
  null,
  0,
  1,
  3,
  11,
  -2,
  0.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 60,
  0n,
  5n,
  101n,
  -1n,
  '',
  'a',
  'ab',
  'abcdef',
  '/x',
  'a-b',
  '12',
  'x',
  true,
  false,
  [],
  ['a'],
  ['a', 'b', 'c'],
  [1],
  [1, 2],
  ['abcd'],
  {},
  { a: 'x' },
  { a: 'abcd' },
  { a: 'x', b: 1, c: false, d: 3 },
  { a: 'x', zz: 1 },
  { a: 'x', y: 2, z: 3 },
  { n: { x: 1 } },
  { n: { x: -1, q: 1 } },
  { b: true },
  { abc: 1, DEF: 2 },
  { abc: -1 },
  new Uint8Array(2),
  new Date(0),
  { host: 'h', port: 80 },
  { port: 0 },
  { code: 'E', message: 'm' },
  { a: undefined },
  Object.create(null),
];

function compare(name: string, schema: unknown, input: unknown): void {
  const mine = (schema as zm.ZodMiniType).safeParse(input);
  const theirs = z.toZod(schema, zm).safeParse(input, { error: en().localeError });
  const ctx = `${name} on ${String(typeof input === 'bigint' ? `${input}n` : JSON.stringify(input))}`;
  expect(mine.success, ctx).toBe(theirs.success);
  if (mine.success && theirs.success) expect(mine.data, ctx).toEqual(theirs.data);
  if (!mine.success && !theirs.success) {
    const paths = (i: readonly { path: PropertyKey[] }[]) => i.map((x) => x.path.map(String).join('.')).sort();
    expect(paths(mine.error.issues), ctx).toEqual(paths(theirs.error.issues));
    expect(z.prettifyError(mine.error), ctx).toBe(zm.prettifyError(theirs.error));
  }
}

describe('hand-written readers agree with zod', () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`${name}: the same verdict, output, issue paths and messages on a table of inputs`, () => {
      for (const input of TABLE) compare(name, schema, input);
    });
  }

  it('every schema gives the same verdict and output as zod on random values', () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withTypedArray: true }), (input) => {
        for (const [name, schema] of Object.entries(SCHEMAS)) {
          const mine = (schema as zm.ZodMiniType).safeParse(input);
          const theirs = z.toZod(schema, zm).safeParse(input);
          expect(mine.success, name).toBe(theirs.success);
          if (mine.success && theirs.success) expect(mine.data, name).toEqual(theirs.data);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('explain loads zod and gives its verdict and listing for a refused input', async () => {
    const r = await z.explain(SCHEMAS['strict'], { a: 'abcd', q: 1 });
    expect(r.success).toBe(false);
    if (!r.success) expect(r.message).toContain('Unrecognized key: "q"');
  });
});

/** zod schemas of the peer messages whose readers are written by hand in src (the readers' record). */
const zText = (max: number, min = 0) => zm.string().check(zm.minLength(min), zm.maxLength(max));
const zInt = (min: number, max: number) => zm.number().check(zm.int(), zm.gte(min), zm.lte(max));
const ERROR_BODY = zm.object({
  code: zText(64, 1),
  message: zText(4096),
  retryable: zm.optional(zm.boolean()),
  handler: zm.optional(zText(255)),
});
const HELLO = zm.object({
  worker: zm.string().check(zm.regex(/^[0-9a-f]{16}$/)),
  instance: zText(64, 1),
  session: zm.union([
    zInt(0, Number.MAX_SAFE_INTEGER),
    zm.pipe(
      zm.bigint().check(zm.gte(0n), zm.lte(BigInt(Number.MAX_SAFE_INTEGER))),
      zm.transform((v) => Number(v)),
    ),
  ]),
  lane: zInt(0, 15),
  lanes: zInt(1, 16),
  maxMessageSize: zInt(256, 0xffffffff),
  keys: zm.array(zText(128)).check(zm.maxLength(64)),
  address: zm.optional(zText(512)),
  window: zm.optional(zInt(1, 0xffffffff)),
  credential: zm.optional(zText(8192)),
  claim: zm.optional(zm.string().check(zm.regex(/^(?:[0-9a-f]{32})?$/))),
});
const GOOD_HELLO = {
  worker: '0123456789abcdef',
  instance: 'a1',
  session: 7,
  lane: 0,
  lanes: 2,
  maxMessageSize: 1 << 20,
  keys: ['messenger-mux-v2'],
};
const HELLO_CASES: unknown[] = [
  GOOD_HELLO,
  { ...GOOD_HELLO, session: 2n ** 40n, window: 65_536, claim: '', address: 'ws://x', extra: [1] },
  { ...GOOD_HELLO, claim: 'ab'.repeat(16), credential: 'token' },
  ...Object.keys(GOOD_HELLO).map((k) => ({ ...GOOD_HELLO, [k]: undefined })),
  { ...GOOD_HELLO, worker: '0123456789ABCDEF' },
  { ...GOOD_HELLO, instance: '' },
  { ...GOOD_HELLO, session: -1 },
  { ...GOOD_HELLO, session: 2n ** 53n },
  { ...GOOD_HELLO, session: 1.5 },
  { ...GOOD_HELLO, lane: 16 },
  { ...GOOD_HELLO, lanes: 0 },
  { ...GOOD_HELLO, maxMessageSize: 255 },
  { ...GOOD_HELLO, keys: Array(65).fill('k') },
  { ...GOOD_HELLO, keys: ['x'.repeat(129)] },
  { ...GOOD_HELLO, window: 0 },
  { ...GOOD_HELLO, window: null },
  { ...GOOD_HELLO, credential: 'x'.repeat(8193) },
  { ...GOOD_HELLO, claim: 'xyz' },
  { ...GOOD_HELLO, address: 'x'.repeat(513) },
];
const ERROR_CASES: unknown[] = [
  { code: 'ERR_X', message: 'm' },
  { code: 'ERR_X', message: '', retryable: true, handler: 'h', more: 1 },
  { code: '', message: 'm' },
  { code: 'E'.repeat(65), message: 'm' },
  { code: 'E', message: 'm'.repeat(4097) },
  { code: 'E', message: 'm', retryable: 'yes' },
  { code: 'E', message: 'm', handler: 'h'.repeat(256) },
  { code: 'E' },
];

describe('hand-written readers of peer messages agree with their zod schemas', () => {
  const verdicts = (mine: unknown, zod: { success: boolean; data?: unknown }, input: unknown) => {
    const ctx = JSON.stringify(input, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v));
    expect(typeof mine !== 'string' && mine !== undefined, ctx).toBe(zod.success);
    if (zod.success) expect(mine, ctx).toEqual(zod.data);
  };

  it('readHello takes and refuses what the HELLO schema does, with the same fields', () => {
    for (const input of [...HELLO_CASES, ...TABLE]) verdicts(readHello(input), HELLO.safeParse(input), input);
  });

  it('readHello names the field a refused HELLO breaks', () => {
    for (const input of HELLO_CASES) {
      const mine = readHello(input);
      const zod = HELLO.safeParse(input);
      if (!zod.success) expect(mine).toBe(String(zod.error.issues[0]!.path[0]));
    }
  });

  it('readErrorBody takes and refuses what the error-body schema does', () => {
    for (const input of [...ERROR_CASES, ...TABLE]) verdicts(readErrorBody(input), ERROR_BODY.safeParse(input), input);
  });

  it('both agree with zod on random values', () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withTypedArray: true }), (input) => {
        expect(typeof readHello(input) !== 'string').toBe(HELLO.safeParse(input).success);
        expect(readErrorBody(input) !== undefined).toBe(ERROR_BODY.safeParse(input).success);
      }),
      { numRuns: 300 },
    );
  });
});
