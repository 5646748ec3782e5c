/**
 * Structure-aware mutation of valid encodings (MessagePack bodies, HELLO and GOAWAY messages,
 * length-prefixed frames, ticket and handle text) for `npm run fuzz`. Every choice comes from the
 * caller's seeded PRNG, so a seed names the whole input sequence.
 */
import { INTERESTING_U8, INTERESTING_U32 } from './batch-mutate.ts';

/** Largest input a mutation grows to: keeps one input's work bounded. */
export const MAX_INPUT = 16 * 1024;

export type Rand = () => number;

/** Random bytes, length `0..max`. */
export function randomBytes(rand: Rand, max: number): Uint8Array {
  const p = new Uint8Array(rand() % (max + 1));
  for (let i = 0; i < p.length; i++) p[i] = rand() & 0xff;
  return p;
}

function cat(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(Math.min(n, MAX_INPUT));
  let at = 0;
  for (const p of parts) {
    const take = Math.min(p.length, out.length - at);
    out.set(p.subarray(0, take), at);
    at += take;
  }
  return out;
}

/** Big-endian write of `v` in `width` bytes at `at` (clipped at the end of `p`). */
function setBE(p: Uint8Array, at: number, width: number, v: number): void {
  for (let k = width - 1, x = v; k >= 0; k--, x = Math.floor(x / 256)) if (at + k < p.length) p[at + k] = x & 0xff;
}

/** Width of the length (or payload) field after a MessagePack header byte, or 0 when it has none. */
function lengthWidth(b: number): number {
  switch (b) {
    case 0xc4: // bin 8
    case 0xc7: // ext 8
    case 0xd9: // str 8
    case 0xcc: // uint 8
    case 0xd0: // int 8
      return 1;
    case 0xc5:
    case 0xc8:
    case 0xda:
    case 0xdc: // array 16
    case 0xde: // map 16
    case 0xcd:
    case 0xd1:
      return 2;
    case 0xc6:
    case 0xc9:
    case 0xdb:
    case 0xdd: // array 32
    case 0xdf: // map 32
    case 0xce:
    case 0xd2:
    case 0xca: // float 32
      return 4;
    case 0xcf:
    case 0xd3:
    case 0xcb: // float 64
      return 8;
    default:
      return 0;
  }
}

/** Offsets of bytes that read as a MessagePack header with a length or a count (fix forms included). */
function headerOffsets(p: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 0; i < p.length; i++) {
    const b = p[i]!;
    if (lengthWidth(b) > 0 || (b & 0xe0) === 0xa0 || (b & 0xf0) === 0x80 || (b & 0xf0) === 0x90) out.push(i);
  }
  return out;
}

/** Headers that make a decoder reserve or recurse: deep nesting, counts far beyond the bytes. */
const BOMBS: readonly (readonly number[])[] = [
  [0xdc, 0xff, 0xff],
  [0xdd, 0xff, 0xff, 0xff, 0xff],
  [0xdf, 0x7f, 0xff, 0xff, 0xff],
  [0xde, 0xff, 0xff],
  [0xc6, 0xff, 0xff, 0xff, 0xff],
  [0xdb, 0x7f, 0xff, 0xff, 0xff],
  [0xc9, 0xff, 0xff, 0xff, 0xff, 0x01],
  [0xd4, 0xff, 0x00], // fixext 1, timestamp type
  [0xd6, 0xff, 0xff, 0xff, 0xff, 0xff], // timestamp 32
  [0xc7, 0x0c, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // timestamp 96
  [0xc1],
  [0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0], // NaN
  [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
  [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0],
];

/** One mutation of `p`; `others` are the target's other valid encodings (for splices). */
function mutateOnce(rand: Rand, p: Uint8Array, others: readonly Uint8Array[]): Uint8Array {
  const pick = (n: number) => rand() % Math.max(1, n);
  const n = p.length;
  switch (pick(14)) {
    case 0: // bit flip
      if (n) {
        const at = pick(n);
        p[at] = p[at]! ^ (1 << pick(8));
      }
      return p;
    case 1: // interesting byte
      if (n) p[pick(n)] = pick(2) ? INTERESTING_U8[pick(INTERESTING_U8.length)]! : pick(256);
      return p;
    case 2: // truncate
      return p.slice(0, pick(n + 1));
    case 3: // extend with random bytes
      return cat(p, randomBytes(rand, 32));
    case 4: {
      // splice: a prefix of this one and a suffix of another valid encoding
      const o = others[pick(others.length)] ?? p;
      return cat(p.subarray(0, pick(n + 1)), o.subarray(pick(o.length + 1)));
    }
    case 5: {
      // duplicate a segment in place
      const a = pick(n + 1);
      const b = a + pick(n - a + 1);
      return cat(p.subarray(0, b), p.subarray(a, b), p.subarray(b));
    }
    case 6: {
      // delete a segment
      const a = pick(n + 1);
      const b = a + pick(Math.min(16, n - a) + 1);
      return cat(p.subarray(0, a), p.subarray(b));
    }
    case 7:
    case 8: {
      // rewrite a MessagePack length, count or integer field
      const hs = headerOffsets(p);
      if (hs.length === 0) return p;
      const at = hs[pick(hs.length)]!;
      const b = p[at]!;
      const w = lengthWidth(b);
      if (w === 0) {
        // a fix form: change its count / length in the low bits
        p[at] = (b & 0xe0) === 0xa0 ? 0xa0 | pick(32) : (b & 0xf0) | pick(16);
        return p;
      }
      const cur = n > at + w ? Number.parseInt(Array.from(p.subarray(at + 1, at + 1 + w), hex2).join(''), 16) : 0;
      const vals = [0, 1, cur + 1, cur - 1, cur * 2, n - at, INTERESTING_U32[pick(INTERESTING_U32.length)]!, rand()];
      setBE(p, at + 1, Math.min(w, 4), Math.max(0, vals[pick(vals.length)]!) % 2 ** (8 * Math.min(w, 4)));
      return p;
    }
    case 9: {
      // change a header's form (fixstr ↔ str8, fixmap ↔ map16…) without fixing its length
      const hs = headerOffsets(p);
      if (hs.length === 0) return p;
      p[hs[pick(hs.length)]!] = [0xd9, 0xda, 0xdb, 0xc4, 0xc5, 0xdc, 0xde, 0x80, 0x90, 0xa0, 0xc0, 0xc2][pick(12)]!;
      return p;
    }
    case 10: {
      // insert a bomb header
      const at = pick(n + 1);
      return cat(p.subarray(0, at), Uint8Array.from(BOMBS[pick(BOMBS.length)]!), p.subarray(at));
    }
    case 11: {
      // deep nesting: many one-element arrays or maps
      const at = pick(n + 1);
      const depth = [10, 63, 64, 65, 200, 5_000][pick(6)]!;
      const nest = new Uint8Array(depth).fill(pick(2) ? 0x91 : 0x81);
      return cat(p.subarray(0, at), nest, p.subarray(at));
    }
    case 12: {
      // text-level: a character class swap (hex digits, case, separators)
      if (!n) return p;
      p[pick(n)] = [0x30, 0x39, 0x61, 0x66, 0x67, 0x41, 0x46, 0x2e, 0x78, 0x2d, 0x5f, 0x3d, 0x2b, 0x2f, 0x00][
        pick(15)
      ]!;
      return p;
    }
    default: {
      // several random overwrites
      for (let k = 0; k < 4 && n > 0; k++) p[pick(n)] = pick(256);
      return p;
    }
  }
}

const hex2 = (b: number): string => b.toString(16).padStart(2, '0');

/** A fuzz input for a target: 15 % random bytes, else 1–4 mutations of one of its valid encodings. */
export function mutateSeed(rand: Rand, seeds: readonly Uint8Array[]): Uint8Array {
  if (rand() % 100 < 15 || seeds.length === 0) return randomBytes(rand, 300);
  let p: Uint8Array = seeds[rand() % seeds.length]!.slice();
  const m = 1 + (rand() % 4);
  for (let k = 0; k < m; k++) p = mutateOnce(rand, p, seeds);
  return p;
}
