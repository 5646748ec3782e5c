/**
 * What the parts of a node share (node.ts composes them: consumer.ts, producer.ts, mpsc-host.ts,
 * unattached.ts): its messenger, mux, config, metrics and runtime, and the registries of its
 * anchors, same-worker ports, per-stream attaches and live senders.
 */
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { Messenger } from '../messenger/types.ts';
import type { ResolvedMuxConfig } from '../mux/config.ts';
import type { Mux } from '../mux/mux.ts';
import type { SlotBuffer } from '../mux/slot-buffer.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MAX_WAITING_SENDERS, type StreamAnchor } from './anchor.ts';
import { StreamError } from './errors.ts';
import type { MpscAnchor, MpscFeed } from './mpsc-anchor.ts';
import type { PerStreamTransport } from './per-stream.ts';
import type { LocalPort } from './port.ts';
import type { StreamSender } from './sender.ts';
import type { ResolvedResume } from './resume-options.ts';
import type { ResumeRegistry } from './resume-registry.ts';
import { ResumePeers } from './resume-peers.ts';
import type { NodeDrain } from './drain.ts';
import { drainingError, PeerDrains } from './drain-notice.ts';

/** Depth of an anchor's own channel (same-worker and per-stream senders), as in the reference. */
export const ANCHOR_CHANNEL_DEPTH = 256;

/** Why an attach behind detached senders is refused (see `MAX_WAITING_SENDERS`). */
export const WAITING_FULL = `the anchor's consumer has not read the streams of its earlier senders yet (${MAX_WAITING_SENDERS} wait behind the one it reads): attach again once it has read on`;

/** A per-stream attach awaiting its connection: the anchor and the buffer it already reads (and the MPSC feed, if any). */
export interface PendingPerStream {
  readonly anchor: StreamAnchor<unknown> | MpscAnchor<unknown>;
  readonly buffer: SlotBuffer;
  readonly feed?: MpscFeed;
  stop?: boolean;
  /** Set once the connection arrived: drops it (unless its terminal came), for a sender the anchor will never read. */
  abort?: (error: StreamError) => void;
}

/** A refused attach: counted, and answered `{ Err: { reason } }`. */
export function refuse(metrics: MuxMetrics, reason: string): unknown {
  metrics.anchorOperation('attach', 'error', 'none');
  return { Err: { reason } };
}

/** The state every part of a node reads and writes. */
export class NodeState {
  /** This node's 64-bit worker id (the routing key in its anchor handles). */
  readonly workerId: bigint;
  readonly messenger: Messenger;
  readonly config: ResolvedMuxConfig;
  readonly mux: Mux | null;
  readonly metrics: MuxMetrics;
  readonly runtime: Runtime;
  readonly perStream: PerStreamTransport | null;
  /** Where the per-stream path listens, once it does. */
  perStreamEndpoint: string | null = null;
  readonly anchors = new Map<bigint, StreamAnchor<unknown>>();
  readonly mpscAnchors = new Map<bigint, MpscAnchor<unknown>>();
  readonly locals = new Map<StreamAnchor<unknown>, LocalPort>();
  /** Per-stream attaches awaiting their connection: the anchor and the buffer it already reads (and the MPSC feed, if any). */
  readonly perStreamBinds = new Map<string, PendingPerStream>();
  /** Live per-stream connections by anchor: dropping one resets it unless its terminal already arrived. */
  readonly perStreamDrops = new Map<StreamAnchor<unknown>, (error: StreamError) => void>();
  /** Live per-stream connections by anchor: the consumer's stop request (docs/protocol.md §9). */
  readonly perStreamStops = new Map<StreamAnchor<unknown>, () => void>();
  readonly liveSenders = new Set<StreamSender<unknown>>();
  /** The transport keys an attach request offers, sorted (fixed for the node's life; never mutated). */
  readonly offeredKeys: readonly string[];
  readonly unattachedTimeout: number;
  /** Resume as configured (null: off). */
  readonly resumeOptions: ResolvedResume | null;
  /** Which peers mux streams resume with (null: resume off, or no mux); the consumer and producer sides ask it. */
  readonly resumePeers: ResumePeers | null;
  /** The producer's resumable streams (null: resume off); set by the producer side. */
  resume: ResumeRegistry | null = null;
  closed = false;
  /** This node's drain, once `drain()` was called (it takes no new streams from then on). */
  drain: NodeDrain | null = null;
  /** The draining notices heard from peers (docs/protocol.md §8.4). */
  readonly peerDrains: PeerDrains;

  constructor(
    init: Pick<
      NodeState,
      | 'workerId'
      | 'messenger'
      | 'config'
      | 'mux'
      | 'metrics'
      | 'runtime'
      | 'perStream'
      | 'offeredKeys'
      | 'unattachedTimeout'
      | 'resumeOptions'
    >,
  ) {
    this.workerId = init.workerId;
    this.messenger = init.messenger;
    this.config = init.config;
    this.mux = init.mux;
    this.metrics = init.metrics;
    this.runtime = init.runtime;
    this.perStream = init.perStream;
    this.offeredKeys = init.offeredKeys;
    this.unattachedTimeout = init.unattachedTimeout;
    this.resumeOptions = init.resumeOptions;
    this.peerDrains = new PeerDrains(init.messenger, init.metrics);
    // After the drains table: a peer's link reaches it first, as it did when the registry listened itself.
    this.resumePeers =
      init.resumeOptions !== null && init.mux !== null
        ? new ResumePeers(init.messenger, init.resumeOptions.windowMs)
        : null;
  }

  /** The node takes new streams: it is neither closed nor draining. */
  assertOpen(): void {
    if (this.closed) throw new StreamError('ERR_CLOSED', 'the node is closed');
    if (this.drain !== null) throw drainingError('this node is draining: it takes no new streams');
  }
}
