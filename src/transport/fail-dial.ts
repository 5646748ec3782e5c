/**
 * A dial that cannot even start (a bad address, a closed adapter, an adapter that only listens):
 * it fails on the next microtask, as every dial reports asynchronously, unless `close()` came first
 * (a closed dial reports nothing).
 */
import type { LanemuxError } from '../errors.ts';
import type { DialEvents, DialHandle } from './port.ts';

export function failDial(events: DialEvents, error: LanemuxError): DialHandle {
  let cancelled = false;
  queueMicrotask(() => {
    if (!cancelled) events.fail(error);
  });
  return {
    close: () => {
      cancelled = true;
    },
  };
}
