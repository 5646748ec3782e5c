/**
 * Field forms shared by the attach messages (attach-messages.ts) and the stream-open ticket
 * (ticket.ts), docs/protocol.md §8: the bounds, read by both the zod schemas and the fast readers so
 * the two cannot drift apart, and the `0x…` hex form of 64-bit fields.
 */
import * as z from '../schema.ts';

export const U64_RE = /^0x[0-9a-f]{1,16}$/;
export const KEY_MAX = 64;
export const KEYS_MAX = 16;
export const HEARTBEAT_MAX = 86_400_000;
export const HEARTBEAT_DEFAULT = 5000;
export const CREDIT_MAX = 0xffff_ffff;
export const BUDGET_MAX = 2 ** 40;
export const LANE_MAX = 15;
export const ENDPOINT_MAX = 256;

export const u64 = z.pipe(
  z.string().check(z.regex(U64_RE, 'a u64 as 0x-prefixed lower-case hex')),
  z.transform((s) => BigInt(s)),
);
/** `{ hi, lo }` of a u128 handle. */
export const u128Schema = z.object({ hi: u64, lo: u64 });

/** A u64 as the wire writes it: `0x` + lower-case hex, no leading zeros. */
export const hex = (v: bigint): string => `0x${BigInt.asUintN(64, v).toString(16)}`;
