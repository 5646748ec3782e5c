/**
 * The re-dial back-off of the adapters that reconnect by themselves (the WebSocket, WebTransport and
 * browser clients): their own options, unless `connect(address, { reconnect: { … } })` gave a policy
 * (`DialRequest.backoff`), which then applies to that dial.
 */
import { randomFraction, type Runtime } from '../runtime/runtime.ts';
import type { DialBackoff, DialRequest } from '../transport/port.ts';

/** The back-off options the reconnecting adapters share. */
export interface AdapterBackoffOptions {
  readonly minReconnectionDelay: number;
  readonly reconnectionJitter: number;
  readonly reconnectionDelayGrowFactor: number;
  readonly maxReconnectionDelay: number;
}

/** The dial's back-off: the connect's policy if it gave one, else the adapter's options. */
export function backoffFor(request: DialRequest, o: AdapterBackoffOptions): DialBackoff {
  return (
    request.backoff ?? {
      initialDelayMs: o.minReconnectionDelay,
      jitterMs: o.reconnectionJitter,
      factor: o.reconnectionDelayGrowFactor,
      maxDelayMs: o.maxReconnectionDelay,
    }
  );
}

/** The delay before re-dial `step` (0-based): `(initial + random·jitter)·factor^step`, at most the maximum. */
export function backoffDelay(b: DialBackoff, step: number, rt: Runtime): number {
  return Math.min(b.maxDelayMs, (b.initialDelayMs + randomFraction(rt) * b.jitterMs) * b.factor ** step);
}
