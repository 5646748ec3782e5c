/**
 * What a batcher is given: the transport as it writes batches ({@link BatchSink}), its mux
 * ({@link BatcherHost}: config, metrics, runtime, epochs, rendezvous staging, the peer's shared
 * egress), and the batch cap it derives from them.
 */
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { Admission, PeerId } from '../messenger/types.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { COALESCE_THRESHOLD, MIN_BATCH_CAP } from '../wire/constants.ts';
import type { ResolvedMuxConfig } from './config.ts';
import type { PeerEgress } from './peer-egress.ts';
import type { ReplayHooks } from './replay-log.ts';

/** The transport as a batcher uses it. */
export interface BatchSink {
  /** Send one batch; with `linkEpoch`, only on that connection of the peer. */
  sendBatch(peer: PeerId, lane: number, payload: Uint8Array, linkEpoch?: number): Admission;
  maxMessageSize(peer: PeerId): number;
  /** The peer's current connection epoch, if the transport has one. */
  linkEpoch?(peer: PeerId): number | undefined;
}

/** What a batcher needs from its mux. */
export interface BatcherHost {
  readonly config: ResolvedMuxConfig;
  readonly metrics: MuxMetrics;
  readonly runtime: Runtime;
  readonly sink: BatchSink;
  /** A fresh epoch from the transport-wide counter (starts at 1). */
  nextEpoch(): bigint;
  /** True while the peer is connected (credit owed to a gone peer is moot, not lost). */
  peerAlive(peer: PeerId): boolean;
  /** Hand credit replies a retiring batcher could not write to its replacement. */
  repostCredit(peer: PeerId, lane: number, credit: readonly number[]): void;
  /** Rendezvous: keep a singleton batch for the peer to pull; its descriptor's admission resolves it. */
  stage(peer: PeerId, lane: number, payload: Uint8Array, muxSlot: string): { id: number; admission: Admission };
  /** True if a singleton of `size` bytes may be staged toward `peer` now. */
  stageRoom(peer: PeerId, size: number): boolean;
  /** Call `cb` once when staged bytes toward `peer` are released. */
  whenStageRoom(peer: PeerId, cb: () => void): void;
  /** Withheld bytes and the window toward `peer`, shared by its lanes (absent: unbounded). */
  peerEgress?(peer: PeerId): PeerEgress;
  /** The receive window `peer` advertised for its current link (absent or `Infinity`: no limit). */
  sendWindow?(peer: PeerId): number;
  /** The replay logs' budget and PING (replay-log.ts); null until the node's resume is on. */
  readonly replay?: ReplayHooks | null;
}

/** Batch cap: max(29, min(maxBatchBytes, eager budget, 65,536)) (docs/protocol.md §8.1). */
export function batchCap(maxBatchBytes: number, eagerBudget: number): number {
  const budget = eagerBudget > 0 ? eagerBudget : Number.POSITIVE_INFINITY;
  return Math.max(MIN_BATCH_CAP, Math.min(maxBatchBytes, budget, COALESCE_THRESHOLD));
}
