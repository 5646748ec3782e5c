/**
 * The attach request and answer fast paths must not change what a message means: whatever
 * `readAttachRequestFast` / `readAttachOkFast` return, the zod schema returns too, for well-formed
 * messages, odd but valid ones and random damage (wrong types, out of range, missing, extra or
 * `undefined` fields, other prototypes). Anything the fast path gives up on is zod's to parse.
 */
import { describe, expect, it } from 'vitest';
import {
  attachRequestSchema,
  attachRequestZod,
  attachResponseSchema,
  attachResponseZod,
  readAttachOkFast,
  readAttachRequestFast,
} from '../../src/stream/attach-messages.ts';
import { parse } from '../../src/validate.ts';
import { mulberry32Unit } from '../wire/helpers.ts';

/** Deterministic PRNG (mulberry32), so a failure reproduces. */
const prng = mulberry32Unit;
const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** Values of every kind, at and around the bounds the schemas check. */
const ODD: readonly unknown[] = [
  undefined,
  null,
  true,
  0,
  -0,
  1,
  -1,
  1.5,
  15,
  16,
  5000,
  86_400_000,
  86_400_001,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 40,
  2 ** 40 + 1,
  2 ** 53,
  NaN,
  Infinity,
  '',
  'x',
  '0x',
  '0x0',
  '0x1f',
  '0x1F',
  '0X1f',
  '0x0123456789abcdef',
  '0x0123456789abcdef0',
  ' 0x1',
  'messenger-mux-v2',
  'k'.repeat(64),
  'k'.repeat(65),
  'e'.repeat(256),
  'e'.repeat(257),
  5n,
  [],
  ['messenger-mux-v2'],
  ['a', 1],
  Array.from({ length: 16 }, () => 'k'),
  Array.from({ length: 17 }, () => 'k'),
  [null],
  {},
  { hi: '0x1', lo: '0x2' },
  { hi: '0x1' },
  { hi: '0x1', lo: '0x2', extra: 1 },
  { hi: 1, lo: 2 },
  new Map(),
  new Date(0),
  new Uint8Array(2),
];

const hexOf = (r: () => number): string => `0x${Math.floor(r() * 2 ** 32).toString(16)}${r() < 0.3 ? 'abcdef01' : ''}`;

function request(r: () => number): Record<string, unknown> {
  const o: Record<string, unknown> = {
    handle: { hi: hexOf(r), lo: hexOf(r) },
    supported_transport_keys: r() < 0.5 ? ['messenger-mux-v2'] : ['messenger-mux-v2', 'tcp-stream'],
  };
  if (r() < 0.3) o['session_id'] = hexOf(r);
  if (r() < 0.3) o['stream_cancel_handle'] = { hi: hexOf(r), lo: hexOf(r) };
  if (r() < 0.3) o['lane_key'] = hexOf(r);
  if (r() < 0.3) o['attach_id'] = hexOf(r);
  if (r() < 0.2) delete o['supported_transport_keys'];
  return o;
}

function answer(r: () => number): Record<string, unknown> {
  const ok: Record<string, unknown> = {
    streaming_transport_key: 'messenger-mux-v2',
    heartbeat_interval_ms: 5000,
    routing_session_id: hexOf(r),
    initial_credit: Math.floor(r() * 200),
    slot_byte_budget: 1_048_576,
  };
  if (r() < 0.5) ok['lane'] = Math.floor(r() * 16);
  if (r() < 0.2) ok['endpoint'] = '127.0.0.1:4000';
  for (const k of ['heartbeat_interval_ms', 'routing_session_id', 'initial_credit', 'slot_byte_budget'])
    if (r() < 0.1) delete ok[k];
  return { Ok: ok };
}

/** One random change, possibly nested one level down. */
function damage(r: () => number, msg: Record<string, unknown>): unknown {
  const copy = structuredClone(msg);
  const inner =
    copy['Ok'] !== undefined && r() < 0.8
      ? (copy['Ok'] as Record<string, unknown>)
      : copy['handle'] !== undefined && r() < 0.2
        ? (copy['handle'] as Record<string, unknown>)
        : copy;
  const keys = [...Object.keys(inner), 'extra', 'lane', 'endpoint', 'session_id', 'attach_id', 'Err', 'hi', 'lo'];
  const k = pick(r, keys);
  switch (Math.floor(r() * 4)) {
    case 0:
      delete inner[k];
      break;
    case 1:
      return Object.setPrototypeOf(copy, pick(r, [null, Array.prototype, { hi: '0x1' }])) as unknown;
    default:
      inner[k] = pick(r, ODD);
  }
  return copy;
}

function agree(fast: unknown, zod: { success: boolean; data?: unknown }, input: unknown): void {
  if (fast === undefined) return;
  expect(
    zod.success,
    `fast path accepted what zod refuses: ${String(JSON.stringify(input, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)))}`,
  ).toBe(true);
  expect(fast).toStrictEqual(zod.data);
}

describe('attach message fast paths', () => {
  it('read every well-formed request and answer as zod does', () => {
    const r = prng(7);
    for (let i = 0; i < 2000; i++) {
      const q = request(r);
      const fq = readAttachRequestFast(q);
      expect(fq).toBeDefined();
      expect(fq).toStrictEqual(parse(attachRequestZod, q).data);
      const a = answer(r);
      const fa = readAttachOkFast(a);
      expect(fa).toBeDefined();
      expect(fa).toStrictEqual(parse(attachResponseZod, a).data);
    }
  });

  it('never accept what zod refuses, nor read a value differently', () => {
    const r = prng(8);
    for (let i = 0; i < 4000; i++) {
      const q = damage(r, request(r));
      agree(readAttachRequestFast(q), parse(attachRequestZod, q), q);
      const a = damage(r, answer(r));
      agree(readAttachOkFast(a), parse(attachResponseZod, a), a);
      const v = pick(r, ODD);
      agree(readAttachRequestFast(v), parse(attachRequestZod, v), v);
      agree(readAttachOkFast(v), parse(attachResponseZod, v), v);
    }
  });

  it("a refused message still gets zod's message", () => {
    const bad = { Ok: { streaming_transport_key: 'messenger-mux-v2', lane: 16 } };
    const r = attachResponseSchema.safeParse(bad);
    expect(r.success).toBe(false);
    const q = attachRequestSchema.safeParse({ handle: { hi: '0x1', lo: '0xZ' } });
    expect(q.success).toBe(false);
    if (!q.success) expect(q.error.issues[0]?.message).toBe('a u64 as 0x-prefixed lower-case hex');
  });
});
