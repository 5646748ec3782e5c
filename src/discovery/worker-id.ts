/**
 * Worker ids as discovery names them: a u64 as a bigint, or its 16 hex digits (the `<16 hex>` of an
 * anchor handle `lmx1.<worker><local>`). Keys and records use the 16 lower-case digits.
 */
import { ConfigError } from '../errors.ts';

/** A worker id as discovery accepts it: a bigint in `0..2^64-1`, or 16 hex digits. */
export type WorkerIdInput = bigint | string;

const HEX16 = /^[0-9a-f]{16}$/;
const HEX16_ANY_CASE = /^[0-9a-fA-F]{16}$/;

/** True when `text` is a worker id's canonical form: 16 lower-case hex digits. */
export function isWorkerHex(text: string): boolean {
  return HEX16.test(text);
}

/** The 16 lower-case hex digits of `id`. Throws a `ConfigError` (naming `field`) for anything else. */
export function workerHex(id: WorkerIdInput, field = 'workerId'): string {
  if (typeof id === 'bigint') {
    if (id >= 0n && id <= 0xffff_ffff_ffff_ffffn) return id.toString(16).padStart(16, '0');
  } else if (typeof id === 'string' && HEX16_ANY_CASE.test(id)) {
    return id.toLowerCase();
  }
  throw new ConfigError(field, 'must be a bigint in 0..2^64-1 or 16 hex digits');
}

/** The bigint of a canonical 16-digit hex id. */
export function workerIdOf(hex: string): bigint {
  return BigInt(`0x${hex}`);
}
