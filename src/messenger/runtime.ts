/**
 * The messenger's one door to the runtime: its clock, its timers, the randomness of a fresh
 * identity, and the range of delays a timer takes. Every messenger file gets them from here, so
 * moving the messenger onto the injected `Runtime` (`src/runtime/runtime.ts`) changes this file only.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { describeThrown } from '../transport/errors.ts';
import { randomBytes, toHex, unrefTimer, type TimerHandle } from '../transport/runtime.ts';
import { MessengerError } from './errors.ts';

export { nowMs, randomU64, setUnrefTimeout } from '../transport/runtime.ts';
export type { TimerHandle };

/** Cancel a timer of `setUnrefTimeout`. */
export function clearTimer(timer: TimerHandle): void {
  clearTimeout(timer);
}

/** Run `fn` every `ms`; the interval never keeps the process alive. */
export function setUnrefInterval(fn: () => void, ms: number): TimerHandle {
  return unrefTimer(setInterval(fn, ms));
}

/** Cancel an interval of `setUnrefInterval`. */
export function clearUnrefInterval(timer: TimerHandle): void {
  clearInterval(timer);
}

/** A fresh instance id: 16 random hex digits. */
export function randomInstanceId(): string {
  return toHex(randomBytes(8));
}

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
