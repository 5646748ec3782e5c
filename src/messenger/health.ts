/**
 * The health check (docs/protocol.md §4.4, §6): PING/PONG with a deadline, the periodic check of
 * every peer (or those `healthCheck.filter` selects), and the check of a link whose worker id
 * another connection claimed. A check that fails closes the link with `ERR_HEALTH_CHECK_FAILED`.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { swallow } from './admission.ts';
import { Kind, idHead, readU32 } from './envelope.ts';
import { MessengerError } from './errors.ts';
import type { Faults } from './faults.ts';
import type { ResolvedOptions } from './options.ts';
import type { PeerState } from './peer-state.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { checkTimeout } from './call-timeout.ts';
import type { PeerInfo } from './types.ts';

/** Deadline of the check a contested link gets when health checks are off (else their own deadline). */
const CONTEST_TIMEOUT_MS = 5_000;

/** Health checks of one messenger's links. */
export class Health {
  readonly #o: ResolvedOptions;
  readonly #rt: Runtime;
  readonly #faults: Faults;

  constructor(o: ResolvedOptions, rt: Runtime, faults: Faults) {
    this.#o = o;
    this.#rt = rt;
    this.#faults = faults;
  }

  /**
   * `Messenger.ping` toward `st` on `lane` (checked by the caller): the round trip in ms. Defaults to
   * the health check's deadline.
   */
  ping(st: PeerState, timeoutMs: number | undefined, lane = 0): Promise<number> {
    const t = timeoutMs ?? (this.#o.healthCheck === false ? 5_000 : this.#o.healthCheck.timeoutMs);
    const badTimeout = checkTimeout('ping', t);
    if (badTimeout !== undefined) return Promise.reject(badTimeout);
    return this.#ping(st, t, lane);
  }

  #ping(st: PeerState, timeoutMs: number, lane = 0): Promise<number> {
    const id = st.allocId(st.pings);
    // The PONG comes back on the PING's lane, behind everything sent on that lane before it.
    const admission = st.link.send(lane, idHead(Kind.Ping, id));
    const rt = this.#rt;
    return new Promise<number>((resolve, reject) => {
      const timer = rt.setTimer(() => {
        if (st.pings.delete(id))
          reject(
            new MessengerError('ERR_TIMEOUT', `ping to ${st.id} unanswered after ${timeoutMs} ms`, { retryable: true }),
          );
      }, timeoutMs);
      st.pings.set(id, {
        start: rt.now(),
        resolve: (rtt) => {
          rt.clearTimer(timer);
          resolve(rtt);
        },
        reject: (error) => {
          rt.clearTimer(timer);
          reject(error);
        },
      });
      if (admission !== true) {
        admission.catch((error: LanemuxError) => {
          const p = st.pings.get(id);
          if (p !== undefined) {
            st.pings.delete(id);
            p.reject(error);
          }
        });
      }
    });
  }

  /** A PING: answer at once with a PONG of the same id on the same lane. */
  onPing(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength !== 5) return this.#faults.malformed(st, lane, 'PING of the wrong length');
    const pong = bytes.slice();
    pong[0] = Kind.Pong;
    swallow(st.link.send(lane, pong));
  }

  /** A PONG: settle its ping with the round trip. */
  onPong(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength !== 5) return this.#faults.malformed(st, lane, 'PONG of the wrong length');
    const id = readU32(bytes, 1);
    const p = st.pings.get(id);
    if (p === undefined) return;
    st.pings.delete(id);
    p.resolve(this.#rt.now() - p.start);
  }

  /** One health-check round: ping every peer with no check outstanding that `filter` selects. */
  tick(peers: Iterable<PeerState>, timeoutMs: number, filter: ((peer: PeerInfo) => boolean) | undefined): void {
    for (const st of peers) {
      if (st.healthPending || st.dead) continue;
      if (filter !== undefined) {
        let wanted = false;
        try {
          wanted = filter(st.info);
        } catch (error) {
          this.#faults.reportError('handler', error, st.id, 'healthCheck.filter');
        }
        if (!wanted) continue;
      }
      st.healthPending = true;
      this.#ping(st, timeoutMs).then(
        () => {
          st.healthPending = false;
        },
        (error: LanemuxError) => {
          st.healthPending = false;
          if (st.dead) return;
          st.link.close(
            new MessengerError('ERR_HEALTH_CHECK_FAILED', `health check of ${st.id} failed: ${error.message}`, {
              retryable: true,
              cause: error,
            }),
          );
        },
      );
    }
  }

  /**
   * Another connection claimed this live link's worker id: check it now, with the ordinary
   * health-check deadline (a slow but healthy peer must not lose its link to a claimant), and close
   * it only if nothing at all arrived from it meanwhile.
   */
  contested(st: PeerState): void {
    if (st.contestPending) return;
    st.contestPending = true;
    const timeoutMs = this.#o.healthCheck === false ? CONTEST_TIMEOUT_MS : this.#o.healthCheck.timeoutMs;
    const before = st.received;
    this.#ping(st, timeoutMs).then(
      () => {
        st.contestPending = false;
      },
      (error: LanemuxError) => {
        st.contestPending = false;
        if (st.dead || st.received !== before) return;
        st.link.close(
          new MessengerError(
            'ERR_HEALTH_CHECK_FAILED',
            `link to ${st.id} did not answer a check after another connection claimed its worker id: ${error.message}`,
            { retryable: true, cause: error },
          ),
        );
      },
    );
  }
}
