/**
 * `MpscSender<T>`: a producer's end of an MPSC anchor. It is a {@link StreamSender} (same `send`,
 * `trySend`, `error`, credit and back-pressure, `stopSignal`/`cancelSignal`, `retired()`) that
 * knows the id the anchor gave it. Its terminal ends only its own part of the stream: the
 * consumer reads `finalize()` as a `finalized` event and `detach()` as `detached`, and the other
 * senders go on. Over the mux it owns its own slot and credit window toward the consumer.
 */
import { StreamSender } from './sender.ts';
import type { SenderInit } from './sender.ts';

/** A producer's end of an MPSC anchor. Get one from `node.attachMpscAnchor(handle)`. */
export class MpscSender<T = unknown> extends StreamSender<T> {
  /** This sender's id within the anchor (every consumer event carries it); unique for the anchor's lifetime. */
  readonly senderId: number;

  /** @internal */
  constructor(init: SenderInit, senderId: number) {
    super(init);
    this.senderId = senderId;
  }
}
