/**
 * The range of a per-call `timeoutMs` (`request`, `ping`, `connect`): what a timer can wait.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { describeThrown } from '../transport/errors.ts';
import { MessengerError } from './errors.ts';

/** Largest delay a timer takes: above it Node fires after 1 ms (and browsers at once). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A per-call `timeoutMs` must be a number in 1..2^31-1 ms; the error to reject with, if not. */
export function checkTimeout(what: string, timeoutMs: unknown): LanemuxError | undefined {
  if (typeof timeoutMs === 'number' && timeoutMs >= 1 && timeoutMs <= MAX_TIMEOUT_MS) return undefined;
  return new MessengerError(
    'ERR_INVALID_ARGUMENT',
    `${what}: timeoutMs must be a number from 1 to ${MAX_TIMEOUT_MS} (ms), got ${describeThrown(timeoutMs)}`,
  );
}
