/**
 * Delivers grants to the gates of a request : gates register under
 * (request, stream), a grant picks its gate with `grantTarget`, and closing a request closes all its gates (L13).
 */
import { assertCount } from './count.ts';
import { CreditError } from './errors.ts';
import type { CreditGate } from './gate.ts';
import { grantTargetIndex } from './grant-target.ts';
import type { StreamKey } from './grant-target.ts';

interface RequestGates {
  readonly streams: StreamKey[];
  readonly gates: CreditGate[];
}

/**
 * Routes grants to registered {@link CreditGate}s by request id and optional stream id.
 *
 * @typeParam R - the request id type (compared as a `Map` key).
 */
export class CreditRouter<R = string | number> {
  readonly #requests = new Map<R, RequestGates>();

  /** Number of requests with at least one registered gate. */
  get size(): number {
    return this.#requests.size;
  }

  /**
   * Registers `gate` under (`request`, `stream`). `null` is "no stream", distinct from `""`.
   *
   * @throws {@link CreditError} `ERR_INVALID_ARGUMENT` if that key is already registered.
   */
  register(request: R, stream: StreamKey, gate: CreditGate): void {
    let entry = this.#requests.get(request);
    if (entry === undefined) {
      entry = { streams: [], gates: [] };
      this.#requests.set(request, entry);
    }
    if (entry.streams.includes(stream)) {
      throw new CreditError(
        'ERR_INVALID_ARGUMENT',
        `a gate is already registered for stream ${String(stream)} of this request`,
      );
    }
    entry.streams.push(stream);
    entry.gates.push(gate);
  }

  /**
   * Delivers a grant of `n` for `request`, naming `stream` (or `null`), to the gate `grantTarget` picks among that
   * request's gates only.
   *
   * @returns whether a gate matched. No match is a correct no-op: grants only unblock.
   */
  route(request: R, stream: StreamKey, n: number): boolean {
    assertCount(n, 'grant');
    const entry = this.#requests.get(request);
    if (entry === undefined) return false;
    const at = grantTargetIndex(entry.streams, stream);
    if (at < 0) return false;
    (entry.gates[at] as CreditGate).grant(n);
    return true;
  }

  /**
   * Removes and closes every gate of `request` with `reason`; their waiters reject with `CreditClosed` (L13).
   *
   * @returns the number of gates closed.
   */
  closeRequest(request: R, reason: string): number {
    const entry = this.#requests.get(request);
    if (entry === undefined) return 0;
    this.#requests.delete(request);
    for (const gate of entry.gates) gate.close(reason);
    return entry.gates.length;
  }
}
