/**
 * Shared helpers of the wire suites: hex, an independent (spec-derived) batch and frame oracle,
 * a record model for property tests, a seeded PRNG, and an allocation guard.
 *
 * Nothing here imports the codec's own writers: the oracle is written from docs/protocol.md §10 so a
 * bug in `src/wire/` cannot hide behind a helper that shares its code.
 */
import type { DecodedBatch, DecodedRecord } from '../../src/wire/index.ts';

// ───────────────────────── hex ─────────────────────────

/** Bytes as lowercase hex pairs separated by single spaces. */
export function hex(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.byteLength; i++) s += (i ? ' ' : '') + bytes[i]!.toString(16).padStart(2, '0');
  return s;
}

/** Parse hex (spaces and case ignored). */
export function fromHex(text: string): Uint8Array {
  const clean = text.replace(/\s+/g, '');
  if (clean.length % 2 !== 0) throw new Error(`odd hex length: ${text}`);
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** Normalise a hex literal from the spec to the `hex()` form. */
export function norm(text: string): string {
  return hex(fromHex(text));
}

export function concat(...parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.byteLength;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.byteLength;
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

// ───────────────────────── independent encoders (spec oracle) ─────────────────────────

const u16 = (n: number): number[] => [(n >>> 8) & 0xff, n & 0xff];
const u32 = (n: number): number[] => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const u64 = (n: bigint): number[] => {
  const out: number[] = [];
  for (let i = 7; i >= 0; i--) out.push(Number((n >> BigInt(i * 8)) & 0xffn));
  return out;
};

/** A 16-byte batch header written by hand from docs/protocol.md §10.1. */
export function refHeader(version: number, flags: number, count: number, epoch: bigint, seq: number): Uint8Array {
  return Uint8Array.from([version, flags, ...u16(count), ...u64(epoch), ...u32(seq)]);
}

/** A record written by hand from docs/protocol.md §10.2. */
export function refRecord(
  type: number,
  slot: number,
  seq: number,
  body: Uint8Array,
  declaredLen = body.byteLength,
): Uint8Array {
  return concat(Uint8Array.from([type, ...u32(slot), ...u32(seq), ...u32(declaredLen)]), body);
}

const textEncoder = new TextEncoder();

/** msgpack str header in its most compact form (fixstr, str8, str16, str32). */
export function refStrHeader(n: number): number[] {
  if (n < 32) return [0xa0 | n];
  if (n < 0x100) return [0xd9, n];
  if (n < 0x1_0000) return [0xda, ...u16(n)];
  return [0xdb, ...u32(n)];
}

/** msgpack bin header in its most compact form (bin8, bin16, bin32). */
export function refBinHeader(n: number): number[] {
  if (n < 0x100) return [0xc4, n];
  if (n < 0x1_0000) return [0xc5, ...u16(n)];
  return [0xc6, ...u32(n)];
}

/** `81 <fixstr name>`: the start of a one-entry-map newtype variant. */
export function refVariantKey(name: string): Uint8Array {
  return Uint8Array.from([0x81, 0xa0 | name.length, ...textEncoder.encode(name)]);
}

/** `{ "<variant>": "<str>" }` with UTF-8 as `TextEncoder` writes it (lone surrogates → U+FFFD). */
export function refNewtypeString(variant: string, str: string): Uint8Array {
  const utf8 = textEncoder.encode(str);
  return concat(refVariantKey(variant), Uint8Array.from(refStrHeader(utf8.byteLength)), utf8);
}

/** `{ "Item": <bin> }`. */
export function refItemBytes(bytes: Uint8Array): Uint8Array {
  return concat(refVariantKey('Item'), Uint8Array.from(refBinHeader(bytes.byteLength)), bytes);
}

/** The string a UTF-8 round trip yields (lone surrogates become U+FFFD). */
export function wellFormed(str: string): string {
  return new TextDecoder().decode(textEncoder.encode(str));
}

// ───────────────────────── a record model ─────────────────────────

/** One record as a property test generates it. */
export type ModelRecord =
  | { readonly t: 'data'; readonly slot: number; readonly seq: number; readonly body: Uint8Array }
  | { readonly t: 'itemString'; readonly slot: number; readonly seq: number; readonly str: string }
  | { readonly t: 'itemBytes'; readonly slot: number; readonly seq: number; readonly bytes: Uint8Array }
  | {
      readonly t: 'open';
      readonly slot: number;
      readonly seq: number;
      readonly anchor: bigint;
      readonly session: bigint;
    }
  | { readonly t: 'close'; readonly slot: number; readonly seq: number; readonly reason: 0 | 1 | 2 | 3 }
  | { readonly t: 'credit'; readonly slot: number; readonly seq: number; readonly delta: number }
  | { readonly t: 'heartbeat'; readonly slot: number; readonly seq: number }
  | {
      readonly t: 'lifecycle';
      readonly slot: number;
      readonly seq: number;
      readonly session: bigint;
      readonly action: 0 | 1;
    };

/** The wire type byte of a model record. */
export function modelType(r: ModelRecord): number {
  switch (r.t) {
    case 'data':
    case 'itemString':
    case 'itemBytes':
      return 0;
    case 'open':
      return 1;
    case 'close':
      return 2;
    case 'credit':
      return 3;
    case 'heartbeat':
      return 4;
    case 'lifecycle':
      return 5;
  }
}

/** The body bytes a model record must have on the wire (written by the oracle, not the codec). */
export function modelBody(r: ModelRecord): Uint8Array {
  switch (r.t) {
    case 'data':
      return r.body;
    case 'itemString':
      return refNewtypeString('Item', r.str);
    case 'itemBytes':
      return refItemBytes(r.bytes);
    case 'open':
      return Uint8Array.from([...u64(r.anchor), ...u64(r.session)]);
    case 'close':
      return Uint8Array.of(r.reason);
    case 'credit':
      return Uint8Array.from(u32(r.delta));
    case 'heartbeat':
      return new Uint8Array(0);
    case 'lifecycle':
      return Uint8Array.from([...u64(r.session), r.action]);
  }
}

/** Full record bytes of a model record, by the oracle. */
export function modelRecordBytes(r: ModelRecord): Uint8Array {
  return refRecord(modelType(r), r.slot, r.seq, modelBody(r));
}

/** Structural view of a decoded record for `toEqual` (body as hex, no buffers). */
export function recordView(r: DecodedRecord): Record<string, unknown> {
  const v: Record<string, unknown> = {
    offset: r.offset,
    type: r.type,
    slot: r.slot,
    frameSeq: r.frameSeq,
    bodyOffset: r.bodyOffset,
    bodyLength: r.bodyLength,
    body: hex(r.body),
  };
  if (r.closeReason !== undefined) v['closeReason'] = r.closeReason;
  if (r.creditDelta !== undefined) v['creditDelta'] = r.creditDelta;
  if (r.anchorId !== undefined) v['anchorId'] = r.anchorId;
  if (r.sessionId !== undefined) v['sessionId'] = r.sessionId;
  if (r.lifecycleAction !== undefined) v['lifecycleAction'] = r.lifecycleAction;
  return v;
}

/** Structural view of a decoded batch. */
export function batchView(b: DecodedBatch): Record<string, unknown> {
  return {
    header: b.header,
    records: b.records.map(recordView),
    error: b.error === null ? null : { kind: b.error.kind, code: b.error.code, offset: b.error.offset },
  };
}

// ───────────────────────── independent decoder (spec oracle) ─────────────────────────

export interface OracleRecord {
  readonly offset: number;
  readonly type: number;
  readonly slot: number;
  readonly frameSeq: number;
  readonly bodyOffset: number;
  readonly bodyLength: number;
}

export interface OracleResult {
  readonly header: { version: number; flags: number; recordCount: number; epoch: bigint; batchSeq: number } | null;
  readonly records: OracleRecord[];
  readonly error: { readonly kind: string; readonly offset: number } | null;
}

const FIXED: Record<number, number> = { 1: 16, 2: 1, 3: 4, 4: 0, 5: 9 };

/**
 * A deliberately naive decoder written from docs/protocol.md §10.4 "Decoding" (byte by byte, no DataView). The
 * order of checks inside one record follows lanemux: type, then body truncation, then fixed
 * length, then close reason / lifecycle action (the spec does not fix that order).
 */
export function oracleDecode(p: Uint8Array): OracleResult {
  const b = (i: number): number => p[i]!;
  const rd32 = (i: number): number => ((b(i) << 24) | (b(i + 1) << 16) | (b(i + 2) << 8) | b(i + 3)) >>> 0;
  if (p.length < 16) return { header: null, records: [], error: { kind: 'TruncatedBatchHeader', offset: 0 } };
  let epoch = 0n;
  for (let i = 4; i < 12; i++) epoch = (epoch << 8n) | BigInt(b(i));
  const header = { version: b(0), flags: b(1), recordCount: (b(2) << 8) | b(3), epoch, batchSeq: rd32(12) };
  const records: OracleRecord[] = [];
  if (header.version !== 2) return { header, records, error: { kind: 'UnsupportedVersion', offset: 0 } };
  let pos = 16;
  for (let k = 0; k < header.recordCount; k++) {
    if (pos === p.length) return { header, records, error: { kind: 'RecordCountMismatch', offset: pos } };
    if (p.length - pos < 13) return { header, records, error: { kind: 'TruncatedRecordHeader', offset: pos } };
    const type = b(pos);
    if (type > 5) return { header, records, error: { kind: 'UnknownRecordType', offset: pos } };
    const len = rd32(pos + 9);
    if (pos + 13 + len > p.length) return { header, records, error: { kind: 'TruncatedRecordBody', offset: pos } };
    const fixed = FIXED[type];
    if (fixed !== undefined && len !== fixed)
      return { header, records, error: { kind: 'BodyLengthMismatch', offset: pos } };
    if (type === 2 && b(pos + 13) > 3) return { header, records, error: { kind: 'UnknownCloseReason', offset: pos } };
    if (type === 5 && b(pos + 13 + 8) > 1)
      return { header, records, error: { kind: 'UnknownLifecycleAction', offset: pos } };
    records.push({
      offset: pos,
      type,
      slot: rd32(pos + 1),
      frameSeq: rd32(pos + 5),
      bodyOffset: pos + 13,
      bodyLength: len,
    });
    pos += 13 + len;
  }
  if (pos !== p.length) return { header, records, error: { kind: 'TrailingBytes', offset: pos } };
  return { header, records, error: null };
}

// ───────────────────────── seeded PRNG ─────────────────────────

/** mulberry32: a tiny, fast, seedable 32-bit PRNG (reproducible fuzz runs). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** {@link mulberry32} scaled to `[0, 1)`, like `Math.random` but reproducible. */
export function mulberry32Unit(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() / 4294967296;
}

// ───────────────────────── allocation guard ─────────────────────────

export interface AllocationViolation {
  readonly ctor: string;
  readonly size: number;
  readonly limit: number;
}

type Ctor = 'ArrayBuffer' | 'Uint8Array' | 'Array';
const GUARDED: readonly Ctor[] = ['ArrayBuffer', 'Uint8Array', 'Array'];

/**
 * Replaces `globalThis.ArrayBuffer`, `globalThis.Uint8Array` and `globalThis.Array` with Proxies
 * whose construct (and, for `Array`, call) trap records any construction whose numeric size
 * argument exceeds `limit`. Install only around synchronous code that runs no test framework
 * code, and always uninstall in `finally`.
 */
export class AllocationGuard {
  /** The largest size allowed for the current input. */
  limit = 0;
  /** Constructions seen above the limit. */
  readonly violations: AllocationViolation[] = [];
  /** Guarded constructions seen at all (proves the traps are live). */
  constructions = 0;
  #saved: Partial<Record<Ctor, unknown>> = {};
  #installed = false;

  install(): void {
    if (this.#installed) throw new Error('AllocationGuard already installed');
    for (const name of GUARDED) {
      const target = Reflect.get(globalThis, name) as (new (
        ...args: unknown[]
      ) => object) &
        ((...args: unknown[]) => unknown);
      this.#saved[name] = target;
      const check = (args: readonly unknown[]): void => {
        this.constructions++;
        const size = sizeArgument(name, args);
        if (size !== undefined && size > this.limit) this.violations.push({ ctor: name, size, limit: this.limit });
      };
      const proxy: unknown = new Proxy(target, {
        construct(t, args, newTarget) {
          check(args);
          return Reflect.construct(t, args, newTarget === proxy ? t : newTarget) as object;
        },
        apply(t, thisArg, args) {
          check(args);
          return Reflect.apply(t, thisArg, args);
        },
      });
      Reflect.set(globalThis, name, proxy);
    }
    this.#installed = true;
  }

  uninstall(): void {
    if (!this.#installed) return;
    for (const name of GUARDED) Reflect.set(globalThis, name, this.#saved[name]);
    this.#saved = {};
    this.#installed = false;
  }

  /** Run `fn` with the guard installed (restored in `finally`). */
  run<T>(limit: number, fn: () => T): T {
    this.limit = limit;
    this.install();
    try {
      return fn();
    } finally {
      this.uninstall();
    }
  }
}

function sizeArgument(name: Ctor, args: readonly unknown[]): number | undefined {
  const [a0, , a2] = args;
  if (name === 'Array') return args.length === 1 && typeof a0 === 'number' ? a0 : undefined;
  if (typeof a0 === 'number') return a0;
  // new Uint8Array(buffer, byteOffset, length): the length is the size.
  if (name === 'Uint8Array' && typeof a2 === 'number') return a2;
  return undefined;
}
