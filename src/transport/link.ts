/**
 * An established peer link: 1..16 lane connections to one peer as one epoch (docs/protocol.md §3.5).
 * Any lane closing kills the whole link; a GOAWAY ends its lane (docs/protocol.md §3.2).
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { type ConnPort, swallow } from './conn-port.ts';
import { TransportError } from './errors.ts';
import { KIND_GOAWAY, KIND_HELLO, TRANSPORT_KIND_MIN, encodeGoaway, parseGoaway } from './hello.ts';
import type { Admission, CloseMode, LinkReceiver, PeerIdentity, PeerLink } from './port.ts';
import type { TimerHandle } from '../runtime/runtime.ts';
import type { TransportImpl } from './transport.ts';

/**
 * After a GOAWAY on one lane of an established link, the other lanes get this long to deliver what
 * the peer sent on them before its GOAWAY there; then the link is closed (at once once every lane has
 * had its GOAWAY).
 */
export const GOAWAY_CLOSE_GRACE_MS = 1_000;

/** One peer link: the lanes of one epoch, the peer's identity, and what the peer said on leaving. */
export class Link implements PeerLink {
  readonly info: PeerIdentity;
  /** Worker id (hex) of the side that dialled this link: ours or the peer's. */
  readonly dialledBy: string;
  readonly lanes: number;
  readonly maxMessageSize: number;
  /**
   * Acceptor side: the token this node issued to the peer in the lane-0 answer. Only a HELLO that
   * presents it (or, with authentication, the same identity) may supersede this link.
   */
  readonly claimToken: string | undefined;
  /** Dialler side: the address we dialled (crossed dials compare it with the incoming connection's host). */
  dialAddress: string | undefined;
  readonly #ports: ConnPort[];
  readonly #transport: TransportImpl;
  readonly #onGone: ((error: LanemuxError) => void) | undefined;
  #receiver: LinkReceiver | undefined;
  #closed = false;
  #remoteReason: LanemuxError | undefined;
  /** Lanes whose GOAWAY arrived: nothing after it on that lane is delivered. */
  readonly #laneEnded: boolean[] = [];
  #endedLanes = 0;
  #goawayTimer: TimerHandle | undefined;

  constructor(
    info: PeerIdentity,
    dialledBy: string,
    ports: ConnPort[],
    transport: TransportImpl,
    ourMax: number,
    onGone: ((error: LanemuxError) => void) | undefined,
    claimToken: string | undefined,
  ) {
    this.info = info;
    this.dialledBy = dialledBy;
    this.claimToken = claimToken;
    this.lanes = info.lanes;
    this.maxMessageSize = Math.min(info.maxMessageSize, ourMax);
    this.#ports = ports;
    this.#transport = transport;
    this.#onGone = onGone;
    ports.forEach((p, lane) => {
      p.owner = undefined;
      p.link = this;
      p.lane = lane;
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  setReceiver(receiver: LinkReceiver): void {
    this.#receiver = receiver;
  }

  send(lane: number, head: Uint8Array, body?: Uint8Array): Admission {
    const port = this.#ports[lane];
    if (port === undefined) {
      return Promise.reject(
        new TransportError('ERR_BAD_LANE', `lane ${lane} is outside 0..${this.lanes - 1} for peer ${this.info.id}`),
      );
    }
    return port.conn.send(head, body);
  }

  bufferedAmount(lane: number): number {
    return this.#ports[lane]?.conn.bufferedAmount() ?? 0;
  }

  pause(): boolean {
    let all = true;
    for (const p of this.#ports) all = p.conn.pause() && all;
    return all;
  }

  resume(): void {
    for (const p of this.#ports) p.conn.resume();
  }

  /** One message from lane `lane`. */
  deliver(lane: number, bytes: Uint8Array): void {
    if (this.#closed || this.#laneEnded[lane] === true) return;
    const kind = bytes[0];
    if (kind === undefined) {
      this.close(new TransportError('ERR_MALFORMED_ENVELOPE', `empty message on lane ${lane} from ${this.info.id}`));
      return;
    }
    if (kind >= TRANSPORT_KIND_MIN) {
      if (kind === KIND_GOAWAY) {
        this.#goaway(lane, bytes);
        return;
      }
      const what = kind === KIND_HELLO ? 'a second HELLO' : `unknown transport kind 0x${kind.toString(16)}`;
      this.close(new TransportError('ERR_MALFORMED_ENVELOPE', `${what} on lane ${lane} from ${this.info.id}`));
      return;
    }
    this.#receiver?.message(lane, bytes);
  }

  /**
   * The peer's GOAWAY on `lane`: the last message of that lane. The peer's close should follow; if it
   * does not, the link is closed once every lane has ended or after {@link GOAWAY_CLOSE_GRACE_MS}.
   */
  #goaway(lane: number, bytes: Uint8Array): void {
    const reported = parseGoaway(bytes);
    if (reported === undefined) {
      this.close(new TransportError('ERR_MALFORMED_ENVELOPE', `malformed GOAWAY on lane ${lane} from ${this.info.id}`));
      return;
    }
    // Report the peer's reason rather than a bare "connection closed".
    const reason = (this.#remoteReason ??= remoteGoaway(reported));
    this.#laneEnded[lane] = true;
    this.#endedLanes++;
    if (this.#endedLanes >= this.lanes) {
      this.close(reason);
      return;
    }
    this.#goawayTimer ??= this.#transport.runtime.setTimer(() => this.close(reason), GOAWAY_CLOSE_GRACE_MS);
  }

  connClosed(lane: number, error: LanemuxError): void {
    if (this.#closed) return;
    const reason = this.#remoteReason ?? error;
    this.#teardown(reason, lane);
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#teardown(reason, -1, mode);
  }

  #teardown(reason: LanemuxError, deadLane: number, mode: CloseMode = 'graceful'): void {
    this.#closed = true;
    if (this.#goawayTimer !== undefined) this.#transport.runtime.clearTimer(this.#goawayTimer);
    for (const p of this.#ports) {
      if (p.lane === deadLane) continue;
      if (mode === 'graceful') swallow(p.conn.send(encodeGoaway(reason)));
      p.conn.close(reason, mode);
    }
    this.#transport.unregister(this);
    this.#receiver?.gone(reason);
    this.#onGone?.(reason);
  }
}

/** Why the losing link of two crossed dials is closed (both sides close the same one). */
export function duplicateLink(worker: string): LanemuxError {
  return new TransportError(
    'ERR_DUPLICATE_LINK',
    `duplicate link: worker ${worker} and this node dialled each other; keeping the link dialled by the lower worker id`,
  );
}

/** A peer's GOAWAY: a normal shutdown on their side is "peer gone" on ours. */
export function remoteGoaway(error: LanemuxError): LanemuxError {
  if (error.code === 'ERR_CLOSED' || error.code === 'ERR_PEER_GONE') {
    return new TransportError('ERR_PEER_GONE', error.message, { retryable: true, cause: error });
  }
  return error;
}
