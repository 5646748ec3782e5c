/**
 * Guards for credit counts (internal). The model's counts are unbounded naturals; lanemux keeps them in plain
 * `number`s and treats one that is not a safe natural as a defect.
 */
import { CreditError } from './errors.ts';

/** Throws `ERR_INVALID_ARGUMENT` unless `n` is a safe non-negative integer. */
export function assertCount(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new CreditError('ERR_INVALID_ARGUMENT', `${what} must be a safe non-negative integer, got ${String(n)}`);
  }
}

/** `a + b` for counts, refusing a sum that no longer fits a safe integer. */
export function checkedAdd(a: number, b: number, what: string): number {
  const sum = a + b;
  if (!Number.isSafeInteger(sum)) {
    throw new CreditError('ERR_INVALID_ARGUMENT', `${what} overflowed: ${String(a)} + ${String(b)}`);
  }
  return sum;
}
