/**
 * The zero-RTT ticket's fast paths must not change what a ticket means. `readTicketFast` reads
 * only the plain shape lanemux writes and gives up on anything else; whatever it returns, the
 * general path (bounded decode + the zod schema) must return too, for well-formed tickets, odd but
 * valid encodings, invalid ones and random byte mutations. `encodeTicket` writes the usual ticket by
 * hand and must write exactly the bytes the MessagePack encoder writes.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { encodeTicket, parseTicket, readTicketFast, ticketSchema } from '../../src/stream/ticket.ts';
import type { StreamOpenTicket } from '../../src/stream/ticket.ts';
import { checkShape } from '../../src/wire/msgpack.ts';
import { parse } from '../../src/validate.ts';
import { mulberry32Unit } from '../wire/helpers.ts';

/** Deterministic PRNG (mulberry32), so a failure reproduces. */
const prng = mulberry32Unit;

/** The general path, as `parseTicket` takes it when the fast path gives up. */
function slow(bytes: Uint8Array): { ok: true; data: unknown } | { ok: false } {
  let raw: unknown;
  try {
    checkShape(bytes);
    raw = new Decoder().decode(bytes);
  } catch {
    return { ok: false };
  }
  const r = parse(ticketSchema, raw);
  return r.success ? { ok: true, data: r.data } : { ok: false };
}

const hex = (v: bigint): string => `0x${BigInt.asUintN(64, v).toString(16)}`;
const b64url = (bytes: Uint8Array): string =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

/** The body lanemux writes for `t` (lane omitted when 0, anchor_id last when present), through the real encoder. */
function referenceBytes(t: StreamOpenTicket): Uint8Array {
  const body: Record<string, unknown> = {
    streaming_transport_key: t.streaming_transport_key,
    heartbeat_interval_ms: t.heartbeat_interval_ms,
    routing_session_id: hex(t.routing_session_id),
    initial_credit: t.initial_credit,
    slot_byte_budget: t.slot_byte_budget,
  };
  if (t.lane !== 0) body['lane'] = t.lane;
  if (t.anchor_id !== undefined) body['anchor_id'] = hex(t.anchor_id);
  return new Encoder().encode(body);
}

const KEYS = [
  'messenger-mux-v2',
  'tcp-stream',
  '',
  'x'.repeat(31),
  'y'.repeat(32),
  'z'.repeat(64),
  'k'.repeat(65),
  'клю',
  'a\u0000b',
];
const INTS = [
  0,
  1,
  15,
  16,
  127,
  128,
  255,
  256,
  5000,
  65_535,
  65_536,
  86_400_000,
  86_400_001,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 40,
  2 ** 40 + 1,
  2 ** 53 - 1,
];
const SESSIONS = [
  0n,
  1n,
  31n,
  2n ** 32n - 1n,
  2n ** 32n,
  2n ** 52n,
  2n ** 53n + 7n,
  2n ** 64n - 1n,
  0x0123456789abcdefn,
];

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

/** Tickets of every field at and around its bounds (some out of range: the fast path must give up there). */
function tickets(r: () => number, n: number): StreamOpenTicket[] {
  const out: StreamOpenTicket[] = [];
  for (let i = 0; i < n; i++) {
    out.push({
      streaming_transport_key: r() < 0.6 ? 'messenger-mux-v2' : pick(r, KEYS),
      heartbeat_interval_ms: pick(r, INTS),
      routing_session_id: r() < 0.5 ? BigInt(Math.floor(r() * 1e6)) : pick(r, SESSIONS),
      initial_credit: pick(r, INTS),
      slot_byte_budget: pick(r, INTS),
      lane: r() < 0.5 ? 0 : Math.floor(r() * 17),
      // Tickets lanemux mints carry the anchor's id; another implementation's may not.
      ...(r() < 0.7 ? { anchor_id: pick(r, SESSIONS) } : {}),
    });
  }
  return out;
}

/** Valid-looking bodies in other shapes: reordered, extra, missing, duplicated or retyped fields. */
function variants(r: () => number, t: StreamOpenTicket): Uint8Array[] {
  const base: Array<[string, unknown]> = [
    ['streaming_transport_key', t.streaming_transport_key],
    ['heartbeat_interval_ms', t.heartbeat_interval_ms],
    ['routing_session_id', hex(t.routing_session_id)],
    ['initial_credit', t.initial_credit],
    ['slot_byte_budget', t.slot_byte_budget],
    ['lane', t.lane],
    ...(t.anchor_id !== undefined ? [['anchor_id', hex(t.anchor_id)] as [string, unknown]] : []),
  ];
  const enc = new Encoder({ useBigInt64: true });
  const asMap = (entries: Array<[string, unknown]>): Uint8Array => {
    // A map written entry by entry, so duplicate keys reach the bytes.
    const parts = entries.map(([k, v]) => [enc.encode(k), enc.encode(v)]);
    const len = parts.reduce((s, [k, v]) => s + k!.length + v!.length, 0);
    const head = entries.length < 16 ? [0x80 | entries.length] : [0xde, entries.length >> 8, entries.length & 0xff];
    const out = new Uint8Array(head.length + len);
    out.set(head);
    let o = head.length;
    for (const [k, v] of parts) {
      out.set(k!, o);
      o += k!.length;
      out.set(v!, o);
      o += v!.length;
    }
    return out;
  };
  const shuffled = [...base].sort(() => r() - 0.5);
  const i = Math.floor(r() * base.length);
  const field = base[i]![0];
  const replace = (v: unknown): Array<[string, unknown]> => base.map(([k, x]) => [k, k === field ? v : x]);
  return [
    asMap(base),
    asMap(shuffled),
    asMap(base.slice(0, 5)),
    asMap([...base, ['extra', 1]]),
    asMap(base.filter((_, j) => j !== i)),
    asMap([...base, base[i]!]),
    asMap(replace(null)),
    asMap(replace('7')),
    asMap(replace(1.5)),
    asMap(replace(-1)),
    asMap(replace(true)),
    asMap(replace(`0X${t.routing_session_id.toString(16)}`)),
    asMap(replace(`0x${t.routing_session_id.toString(16).toUpperCase()}`)),
    asMap(replace(`0x000${t.routing_session_id.toString(16)}`)),
    asMap(replace('0x')),
    asMap(replace(new Uint8Array([1, 2]))),
    asMap(replace(BigInt(t.heartbeat_interval_ms))),
    new Encoder({ forceIntegerToFloat: true }).encode(Object.fromEntries(base)),
    new Encoder({ useBigInt64: true }).encode(
      Object.fromEntries(base.map(([k, v]) => [k, typeof v === 'number' && v > 2 ** 31 ? BigInt(v) : v])),
    ),
    enc.encode([t.streaming_transport_key]),
    enc.encode(Object.fromEntries(base.map(([k, v]) => [k.toUpperCase(), v]))),
  ];
}

/** Random byte damage to a well-formed ticket. */
function mutate(r: () => number, bytes: Uint8Array): Uint8Array {
  const b = Array.from(bytes);
  const p = Math.floor(r() * b.length);
  switch (Math.floor(r() * 5)) {
    case 0:
      b[p] = Math.floor(r() * 256);
      break;
    case 1:
      b[p] = b[p]! ^ (1 << Math.floor(r() * 8));
      break;
    case 2:
      b.splice(p, 0, Math.floor(r() * 256));
      break;
    case 3:
      b.splice(p, 1);
      break;
    default:
      b.length = p;
  }
  return Uint8Array.from(b);
}

function agree(bytes: Uint8Array): void {
  const fast = readTicketFast(bytes);
  if (fast === undefined) return;
  const s = slow(bytes);
  expect(s.ok, `fast path accepted what zod refuses: ${Array.from(bytes).join(',')}`).toBe(true);
  if (s.ok) expect(fast).toStrictEqual(s.data);
}

describe('zero-RTT ticket fast paths', () => {
  it('the fast path reads every ticket lanemux writes, with the value zod gives', () => {
    const r = prng(1);
    let fastHits = 0;
    for (const t of tickets(r, 2000)) {
      const bytes = referenceBytes(t);
      const s = slow(bytes);
      const fast = readTicketFast(bytes);
      if (fast !== undefined) fastHits++;
      if (s.ok) {
        // Every valid ticket with an ASCII key is read by the fast path.
        if (/^[\x00-\x7f]*$/.test(t.streaming_transport_key)) expect(fast).toStrictEqual(s.data);
      } else expect(fast).toBeUndefined();
    }
    expect(fastHits).toBeGreaterThan(200);
  });

  it('the fast path never accepts what zod refuses, nor reads a value differently (variants and mutations)', () => {
    const r = prng(2);
    for (const t of tickets(r, 600)) {
      for (const v of variants(r, t)) agree(v);
      const bytes = referenceBytes(t);
      for (let k = 0; k < 10; k++) agree(mutate(r, bytes));
    }
  });

  it('encodeTicket writes the bytes the MessagePack encoder writes', () => {
    const r = prng(3);
    for (const t of tickets(r, 2000)) {
      let expected: string;
      try {
        expected = b64url(referenceBytes(t));
      } catch {
        continue;
      }
      expect(encodeTicket(t)).toBe(expected);
    }
  });

  it('parseTicket reads base64url text as the standard decoder does (damaged text included)', () => {
    const r = prng(4);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/= .';
    const reference = (text: string): { ok: true; data: unknown } | { ok: false } => {
      if (/[^A-Za-z0-9_-]/.test(text) || text.length % 4 === 1) return { ok: false };
      const std = text.replace(/-/g, '+').replace(/_/g, '/');
      const bytes = Uint8Array.from(atob(std + '='.repeat((4 - (std.length % 4)) % 4)), (c) => c.charCodeAt(0));
      return slow(bytes);
    };
    for (const t of tickets(r, 500)) {
      const good = b64url(referenceBytes(t));
      const p = Math.floor(r() * good.length);
      const c = alphabet[Math.floor(r() * alphabet.length)]!;
      for (const text of [
        good,
        good.slice(0, p) + c + good.slice(p + 1),
        good.slice(0, p),
        good + c,
        good.slice(0, p) + good.slice(p + 1),
      ]) {
        const want = reference(text);
        let got: unknown;
        try {
          got = parseTicket(text);
        } catch (e) {
          expect(e).toMatchObject({ code: 'ERR_INVALID_TICKET' });
          expect(want.ok, `parseTicket refused ${text}`).toBe(false);
          continue;
        }
        expect(want.ok, `parseTicket accepted ${text}`).toBe(true);
        if (want.ok) expect(got).toStrictEqual(want.data);
      }
    }
  });

  it("parseTicket round-trips and keeps zod's message for a bad field", () => {
    const t: StreamOpenTicket = {
      streaming_transport_key: 'messenger-mux-v2',
      heartbeat_interval_ms: 5000,
      routing_session_id: 2n ** 63n + 5n,
      initial_credit: 32,
      slot_byte_budget: 2 ** 20,
      lane: 3,
    };
    expect(parseTicket(encodeTicket(t))).toStrictEqual(t);
    const bound: StreamOpenTicket = { ...t, anchor_id: 2n ** 63n - 1n };
    expect(parseTicket(encodeTicket(bound))).toStrictEqual(bound);
    const bad = b64url(referenceBytes({ ...t, lane: 16 }));
    expect(() => parseTicket(bad)).toThrow('ticket field lane: Too big: expected number to be <=15');
  });
});

describe('encodeTicket writes into a fixed 256-byte scratch', () => {
  it('writes the same ticket as the encoder for every transport key length up to 255 (no scratch overflow)', () => {
    const mismatches: string[] = [];
    for (let len = 0; len <= 255; len++) {
      const t: StreamOpenTicket = {
        streaming_transport_key: 'k'.repeat(len),
        heartbeat_interval_ms: 86_400_000,
        routing_session_id: 0xffff_ffff_ffff_ffffn,
        initial_credit: 0xffff_ffff,
        slot_byte_budget: 2 ** 40,
        lane: 15,
      };
      let got: string;
      try {
        got = encodeTicket(t);
      } catch (e) {
        mismatches.push(`${len}: threw ${(e as Error).name}: ${(e as Error).message}`);
        continue;
      }
      const want = b64url(referenceBytes(t));
      if (got !== want) mismatches.push(`${len}: differs (${got.length} vs ${want.length} chars)`);
    }
    expect(mismatches).toEqual([]);
  });
});
