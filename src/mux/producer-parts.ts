/**
 * The parts of a mux only a producer uses: its batchers (egress slots and their records, written
 * with the replies), the staged singletons it offers peers to pull (rendezvous, docs/protocol.md
 * §10.5), the heartbeat schedule of its streams (§10.8) and its egress toward each peer (withheld
 * bytes, the peer's window, §3.3). A client's mux writes its replies with
 * a reply lane instead (reply-lane.ts). A node's
 * mux gets them (`createNode`); a client's mux does not, so a consumer-only bundle (`lanemux/client`)
 * leaves them out. One implementation each: this module only hands them to the mux.
 */
import { Batcher } from './batcher.ts';
import { HeartbeatSchedule } from './heartbeats.ts';
import type { LaneWriterFactory } from './lane-writer.ts';
import { PeerEgress } from './peer-egress.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import { StageOut, type StageOutHost } from './rendezvous.ts';

/** How a producing mux makes its producer-only parts. */
export interface MuxProducerParts {
  /** The staged-singleton store (`budget` bytes per peer, transfers expire after `ttl` ms). */
  stageOut(host: StageOutHost, budget: number, ttl: number): StageOut;
  /** The schedule of its producers' heartbeats. */
  heartbeats(): HeartbeatSchedule;
  /** The writer of each (peer, lane): a batcher, which opens slots and writes their records with the replies. */
  readonly laneWriter: LaneWriterFactory;
  /** The egress toward a peer, shared by its batchers: withheld bytes and the peer's window. */
  peerEgress(limit: number, metrics: MuxMetrics): PeerEgress;
}

/** The producer parts of a node's mux. */
export const MUX_PRODUCER_PARTS: MuxProducerParts = {
  stageOut: (host, budget, ttl) => new StageOut(host, budget, ttl),
  heartbeats: () => new HeartbeatSchedule(),
  peerEgress: (limit, metrics) => new PeerEgress(limit, metrics),
  laneWriter: (host, peer, lane, ended, previous) => {
    const b = new Batcher(host, peer, lane, ended);
    // Only batchers precede a batcher on a node's lane.
    if (previous !== undefined) b.slotTable.continueFrom((previous as Batcher).slotTable);
    return b;
  },
};
