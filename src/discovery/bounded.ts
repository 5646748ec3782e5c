/**
 * The bound on every operation against a store: a promise that settles within `ms`, or fails with
 * `ERR_DISCOVERY_UNAVAILABLE` (retryable). Other failures come out as lanemux errors.
 */
import type { Runtime } from '../runtime/runtime.ts';
import { asDiscoveryError, DiscoveryError } from './errors.ts';
import type { LanemuxError } from '../errors.ts';

/** `promise`, bounded by `ms` on `runtime`'s clock; `what` names the operation in messages. */
export function bounded<T>(runtime: Runtime, promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = runtime.setTimer(() => {
      reject(
        new DiscoveryError('ERR_DISCOVERY_UNAVAILABLE', `${what}: no answer within ${ms} ms (timeoutMs)`, {
          retryable: true,
        }),
      );
    }, ms);
    promise.then(
      (v) => {
        runtime.clearTimer(timer);
        resolve(v);
      },
      (e: unknown) => {
        runtime.clearTimer(timer);
        reject(asDiscoveryError(e, what));
      },
    );
  });
}

/** `error` as a {@link DiscoveryError} (a lanemux error of another class is wrapped, keeping its message). */
export function toDiscoveryError(error: unknown, what: string): DiscoveryError {
  const e: LanemuxError = asDiscoveryError(error, what);
  return e instanceof DiscoveryError
    ? e
    : new DiscoveryError('ERR_DISCOVERY_UNAVAILABLE', e.message, { cause: e, retryable: e.retryable });
}
