/**
 * Withheld bytes toward one peer, shared by the batchers of all its lanes. A slot without credit
 * keeps its records in its withheld queue up to its own byte budget; this bounds the sum over the
 * peer's slots as well, so a stalled consumer with many streams holds its producer node to about
 * `peerByteBudget` rather than streams × `slotByteBudget`.
 */
export class PeerEgress {
  /** Bytes in the withheld queues of every slot toward the peer. */
  withheldBytes = 0;
  readonly limit: number;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** True when producers of slots without credit should wait. */
  get over(): boolean {
    return this.withheldBytes >= this.limit;
  }
}

/** A budget that never binds (tests and hosts without a peer-wide bound). */
export const UNBOUNDED_EGRESS = (): PeerEgress => new PeerEgress(Number.POSITIVE_INFINITY);
