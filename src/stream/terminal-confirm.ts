/**
 * Proof that a consumer applied a stream's terminal (docs/protocol.md §8.3): a PING sent on the
 * stream's lane after the batch that carried the terminal was handed to the link, and answered.
 * Messages on a lane are dispatched in order and batches synchronously (§5), and a PONG goes back
 * at once on the PING's lane (§4.4), so the answer means the consumer's ingress has the terminal:
 * a lost link can no longer take it, and the stream need not keep its replay ring for the resume
 * window. One PING is in flight per (peer, lane) at a time; the streams that finish while it is out
 * wait for the next one, so a busy lane costs one round trip of PINGs, not one per stream.
 */
import type { PeerId } from '../messenger/types.ts';
import type { LanePing } from '../mux/replay-log.ts';

/** A stream waiting for its terminal to be confirmed. */
export interface ConfirmableStream {
  /** A PING sent after its terminal, on the same link, was answered; `gen` is as given to `add`. */
  terminalConfirmed(gen: number): void;
}

/** One waiting stream: the link epoch and the stream's generation when its terminal went out. */
interface Waiter {
  readonly stream: ConfirmableStream;
  readonly epoch: number;
  readonly gen: number;
}

/** The streams of one (peer, lane): those behind the PING in flight, and those for the next one. */
interface LaneQueue {
  next: Waiter[];
  inFlight: Waiter[] | null;
}

export class TerminalConfirmations {
  readonly #ping: LanePing;
  /** By peer, then by lane (at most 16). */
  readonly #peers = new Map<PeerId, Array<LaneQueue | undefined>>();
  #closed = false;

  constructor(ping: LanePing) {
    this.#ping = ping;
  }

  /** Streams waiting (behind a PING in flight or for the next one): for tests and metrics. */
  get waiting(): number {
    let n = 0;
    for (const lanes of this.#peers.values())
      for (const q of lanes) if (q !== undefined) n += q.next.length + (q.inFlight?.length ?? 0);
    return n;
  }

  /**
   * `stream`'s terminal was handed to the link of `epoch` on `lane`: confirm it with the next PING
   * on that lane. The PING is sent now when none is in flight there.
   */
  add(peer: PeerId, lane: number, epoch: number, gen: number, stream: ConfirmableStream): void {
    if (this.#closed) return;
    let lanes = this.#peers.get(peer);
    if (lanes === undefined) this.#peers.set(peer, (lanes = []));
    let q = lanes[lane];
    if (q === undefined) lanes[lane] = q = { next: [], inFlight: null };
    q.next.push({ stream, epoch, gen });
    if (q.inFlight === null) this.#send(peer, lane, q);
  }

  /** Forget every waiting stream (they linger for the window as without confirmation). */
  close(): void {
    this.#closed = true;
    this.#peers.clear();
  }

  #send(peer: PeerId, lane: number, q: LaneQueue): void {
    const batch = q.next;
    q.next = [];
    q.inFlight = batch;
    const sent = this.#ping(peer, lane);
    const settle = (ok: boolean): void => {
      if (this.#closed || this.#peers.get(peer)?.[lane] !== q) return;
      q.inFlight = null;
      // Only a PING on the link that carried a terminal speaks for it; the stream's generation
      // (checked by the stream) says whether it still lingers on that terminal.
      if (ok) for (const w of batch) if (w.epoch === sent!.epoch) w.stream.terminalConfirmed(w.gen);
      if (q.next.length > 0) this.#send(peer, lane, q);
      else {
        const lanes = this.#peers.get(peer)!;
        lanes[lane] = undefined;
        if (lanes.every((x) => x === undefined)) this.#peers.delete(peer);
      }
    };
    // Unanswered (the link went, or the peer is slow past the deadline): those streams linger as before.
    if (sent === undefined) queueMicrotask(() => settle(false));
    else
      sent.answer.then(
        () => settle(true),
        () => settle(false),
      );
  }
}
