/**
 * The mux's metrics under the reference's series names, so dashboards built for
 * the reference carry over. Hot paths bump plain fields (`m.readerStall++`) or index a typed array
 * by a constant: no label lookup and no allocation per record. `snapshot()` renders the names.
 *
 * @packageDocumentation
 */
import { toFamilies, toPrometheusText } from './exposition.ts';
import { Histogram, RECORDS_PER_BATCH_BUCKETS } from './histogram.ts';

/** Reasons of `records_dropped_total`, indexed by these constants. */
export const DropReason = {
  stale_epoch: 0,
  generation: 1,
  unknown_slot: 2,
  closed_slot: 3,
  slot_collision: 4,
  withheld_overflow: 5,
  stale_singleton: 6,
  duplicate: 7,
  lane_mismatch: 8,
} as const;
export type DropReason = (typeof DropReason)[keyof typeof DropReason];
const DROP_NAMES = Object.keys(DropReason);

/** `records_sent_total{record_type}` index: the wire record type (0..5); also `stragglers_total` and `no_route_total`. */
/**
 * `createNode({ logger })`: where a node reports events a person may want to read (both methods
 * optional; `console` fits). Never called on the hot path.
 */
export interface NodeLogger {
  debug?(message: string, fields: Record<string, unknown>): void;
  warn?(message: string, fields: Record<string, unknown>): void;
}

const RECORD_TYPE_NAMES = ['data', 'open_slot', 'close_slot', 'credit_update', 'slot_heartbeat', 'lifecycle'] as const;

/** `batcher_wakes_total{source}`. */
export const WakeSource = { open: 0, control: 1, frame: 2, inlet_closed: 3, linger: 4 } as const;
export type WakeSource = (typeof WakeSource)[keyof typeof WakeSource];
const WAKE_NAMES = Object.keys(WakeSource);

/** Options of {@link MuxMetrics}. */
export interface MuxMetricsOptions {
  /** Series prefix replacing `velo_`. Defaults to `velo_` (the reference's names). */
  readonly prefix?: string;
}

/** Counters, gauges and histograms of one node's mux and streams. */
export class MuxMetrics {
  readonly prefix: string;
  // gauges
  liveSlots = 0;
  heldRecords = 0;
  withheldRecords = 0;
  stagedRecords = 0;
  activeAnchors = 0;
  /** Slots whose later records wait behind an unresolved singleton or open (lanemux's own gauge). */
  fencedSlots = 0;
  /** Bytes of rendezvous transfers staged for peers to pull, and being assembled from peers (lanemux's own gauges). */
  stagedOutBytes = 0;
  stagedInBytes = 0;
  /** Rendezvous transfers this receiver refused or could not pull (lanemux's own counter). */
  stagedRefused = 0;
  /**
   * Peer window (lanemux's own series). Receive side: Data-record bytes held for peers (slot buffers,
   * holds, unread records of retired slots), summed over peers; and the most one peer's link ever
   * held at once (the figure `peerByteBudget` + one batch bounds). Send side: bytes in flight
   * toward peers, summed.
   */
  receiveWindowHeldBytes = 0;
  receiveWindowPeakBytes = 0;
  sendWindowInflightBytes = 0;
  // counters
  readerStall = 0;
  /** Inbound batches that failed to decode (lanemux's own series: the reference only logs them). */
  decodeErrors = 0;
  generationMismatch = 0;
  slotCreditExhausted = 0;
  rendezvousSingletons = 0;
  controlRefused = 0;
  holdOverflow = 0;
  epochDeaths = 0;
  batchSeqGaps = 0;
  /** Batches whose batch_seq jumped further than any plausible loss: counted once each, not as gaps. */
  batchSeqJumps = 0;
  /** Data records of a window-advertising peer that would have held more than its window plus one batch (slot faulted). */
  peerWindowOverrun = 0;
  /** Slots that had to wait for the peer's window (one per episode). */
  sendWindowBlocked = 0;
  /** Window updates sent and received. */
  windowUpdatesSent = 0;
  windowUpdatesReceived = 0;
  /** Window updates refused: malformed body; releasing more than was in flight; not admitted by the transport. */
  windowUpdateMalformed = 0;
  windowOverRelease = 0;
  windowUpdateSendFailed = 0;
  /** Draining notices (docs/protocol.md §8.4) sent and received, and received ones that did not decode (ignored). */
  drainNoticesSent = 0;
  drainNoticesReceived = 0;
  drainNoticeMalformed = 0;
  /** OpenSlots that named no bind they may claim (unknown session, or an attach answered to another peer). */
  claimRefused = 0;
  drainVisits = 0;
  creditReposted = 0;
  creditLost = 0;
  unclaimedBindReaped = 0;
  watchdogFirings = 0;
  producerSendBackpressure = 0;
  batchesSent = 0;
  batchesReceived = 0;
  readonly recordsDropped = new Float64Array(DROP_NAMES.length);
  /**
   * `stragglers_total{record_type}` (lanemux's own series), by wire record type: records naming a
   * slot that ended moments ago on this side (they crossed its close in flight). The ordinary
   * teardown race: benign, not a drop (docs/protocol.md §10.9).
   */
  readonly stragglers = new Float64Array(RECORD_TYPE_NAMES.length);
  /**
   * `no_route_total{record_type}` (lanemux's own series), by wire record type: records naming a slot
   * this side has no memory of (never opened, or ended longer ago than it remembers): a routing
   * anomaly worth alarming on. The receive side also counts them in `records_dropped_total`.
   */
  readonly noRoute = new Float64Array(RECORD_TYPE_NAMES.length);
  /**
   * `streaming_overruns_total` (lanemux's own series): records live streams (`overrun:
   * 'drop-oldest'` or `'fail'`) dropped or refused because the consumer's credit lagged the source
   * (docs/protocol.md §10.9). Each stream counts its own in `sender.overruns`.
   */
  overruns = 0;
  readonly recordsSent = new Float64Array(RECORD_TYPE_NAMES.length);
  readonly batcherWakes = new Float64Array(WAKE_NAMES.length);
  readonly recordsPerBatchSent = new Histogram(RECORDS_PER_BATCH_BUCKETS);
  readonly recordsPerBatchReceived = new Histogram(RECORDS_PER_BATCH_BUCKETS);
  /** `resumed_streams_total`: streams this node resumed after a lost link (as producer or consumer). */
  resumedStreams = 0;
  /**
   * `lingering_streams` (gauge): finished resumable streams whose replay ring is still kept, until
   * the consumer is known to have their terminal or the resume window passes (docs/protocol.md §8.3).
   */
  lingeringStreams = 0;
  /**
   * `replay_bytes` (gauge): bytes kept to send again after a lost link — the lanes' replay logs and
   * the streams' replay rings, against `maxReplayBytes` (docs/protocol.md §8.3). Read at snapshot.
   */
  replayBytes: (() => number) | null = null;
  /** `resume_failed_total{reason}`: streams that lost their link and could not be resumed, by reason. */
  readonly resumeFailures = new Map<string, number>();
  /** `anchor_operations_total{operation, outcome, transport_scheme}` (not per record). */
  readonly anchorOperations = new Map<string, number>();

  constructor(options: MuxMetricsOptions = {}) {
    this.prefix = options.prefix ?? 'velo_';
  }

  /** Label strings by operation, then scheme, then outcome: built once, not per stream. */
  readonly #labels = new Map<string, Map<string, { success: string; error: string }>>();

  /** Count one anchor operation (attach, detach, finalize, cancel, prebind, open). */
  anchorOperation(operation: string, outcome: 'success' | 'error', scheme: string): void {
    let byScheme = this.#labels.get(operation);
    if (byScheme === undefined) this.#labels.set(operation, (byScheme = new Map()));
    let labels = byScheme.get(scheme);
    if (labels === undefined) {
      const at = (o: string): string => `operation="${operation}",outcome="${o}",transport_scheme="${scheme}"`;
      byScheme.set(scheme, (labels = { success: at('success'), error: at('error') }));
    }
    const key = labels[outcome];
    this.anchorOperations.set(key, (this.anchorOperations.get(key) ?? 0) + 1);
  }

  /** Count one failed resume (`window`, `evicted`, `restarted`, `refused`, `closed`). */
  resumeFailed(reason: string): void {
    this.resumeFailures.set(reason, (this.resumeFailures.get(reason) ?? 0) + 1);
  }

  /** Sum of `records_dropped_total` over every reason, or for one reason. */
  dropped(reason?: keyof typeof DropReason): number {
    if (reason !== undefined) return this.recordsDropped[DropReason[reason]]!;
    return this.recordsDropped.reduce((a, b) => a + b, 0);
  }

  /**
   * Where the node reports what it counts that a person may want to read: stragglers at debug level,
   * records for slots never known at warning level. Null: counted only. Set by `createNode({ logger })`.
   */
  logger: NodeLogger | null = null;

  /** Count a record of wire `recordType` for a slot that ended moments ago (`peer`, `lane`). */
  straggler(recordType: number, peer: string, lane: number): void {
    const n = ++this.stragglers[recordType]!;
    this.logger?.debug?.('lanemux: a record for a stream that just ended (a straggler)', {
      recordType: RECORD_TYPE_NAMES[recordType],
      peer,
      lane,
      count: n,
    });
  }

  /**
   * Count a record of wire `recordType` for a slot this side never knew. Logged at warning level at
   * the 1st, 10th, 100th, … of each type (a hostile peer cannot flood the log).
   */
  noRouteFor(recordType: number, peer: string, lane: number): void {
    const n = ++this.noRoute[recordType]!;
    if (this.logger?.warn === undefined || 10 ** Math.round(Math.log10(n)) !== n) return;
    this.logger.warn('lanemux: records for a slot this node never knew (dropped)', {
      recordType: RECORD_TYPE_NAMES[recordType],
      peer,
      lane,
      count: n,
    });
  }

  /** Sum of `stragglers_total` over every record type, or for one wire record type. */
  straggled(recordType?: number): number {
    if (recordType !== undefined) return this.stragglers[recordType] ?? 0;
    return this.stragglers.reduce((a, b) => a + b, 0);
  }

  /** Sum of `no_route_total` over every record type, or for one wire record type. */
  unrouted(recordType?: number): number {
    if (recordType !== undefined) return this.noRoute[recordType] ?? 0;
    return this.noRoute.reduce((a, b) => a + b, 0);
  }

  /** Every series as `name{labels}` → value, with the reference's names. */
  snapshot(): Record<string, number> {
    const p = this.prefix;
    const mux = `${p}streaming_mux_`;
    const s: Record<string, number> = {
      [`${mux}live_slots`]: this.liveSlots,
      [`${mux}held_records`]: this.heldRecords,
      [`${mux}withheld_records`]: this.withheldRecords,
      [`${mux}staged_records`]: this.stagedRecords,
      [`${mux}fenced_slots`]: this.fencedSlots,
      [`${mux}staged_out_bytes`]: this.stagedOutBytes,
      [`${mux}staged_in_bytes`]: this.stagedInBytes,
      [`${mux}staged_refused_total`]: this.stagedRefused,
      [`${mux}reader_stall_total`]: this.readerStall,
      [`${mux}decode_errors_total`]: this.decodeErrors,
      [`${mux}generation_mismatch_total`]: this.generationMismatch,
      [`${p}streaming_slot_credit_exhausted_total`]: this.slotCreditExhausted,
      [`${mux}rendezvous_singletons_total`]: this.rendezvousSingletons,
      [`${mux}control_refused_total`]: this.controlRefused,
      [`${mux}hold_overflow_total`]: this.holdOverflow,
      [`${mux}epoch_deaths_total`]: this.epochDeaths,
      [`${mux}batch_seq_gaps_total`]: this.batchSeqGaps,
      [`${mux}batch_seq_jumps_total`]: this.batchSeqJumps,
      [`${mux}receive_window_held_bytes`]: this.receiveWindowHeldBytes,
      [`${mux}receive_window_peak_bytes`]: this.receiveWindowPeakBytes,
      [`${mux}send_window_inflight_bytes`]: this.sendWindowInflightBytes,
      [`${mux}send_window_blocked_total`]: this.sendWindowBlocked,
      [`${mux}peer_window_overrun_total`]: this.peerWindowOverrun,
      [`${mux}window_updates_total{direction="sent"}`]: this.windowUpdatesSent,
      [`${mux}window_updates_total{direction="received"}`]: this.windowUpdatesReceived,
      [`${mux}window_update_errors_total{reason="malformed"}`]: this.windowUpdateMalformed,
      [`${mux}window_update_errors_total{reason="over_release"}`]: this.windowOverRelease,
      [`${mux}window_update_errors_total{reason="send_failed"}`]: this.windowUpdateSendFailed,
      [`${mux}claim_refused_total`]: this.claimRefused,
      [`${p}streaming_drain_notices_total{direction="sent"}`]: this.drainNoticesSent,
      [`${p}streaming_drain_notices_total{direction="received"}`]: this.drainNoticesReceived,
      [`${p}streaming_drain_notice_errors_total{reason="malformed"}`]: this.drainNoticeMalformed,
      [`${mux}drain_visits_total`]: this.drainVisits,
      [`${mux}credit_reposted_total`]: this.creditReposted,
      [`${mux}credit_lost_total`]: this.creditLost,
      [`${mux}batches_total{direction="sent"}`]: this.batchesSent,
      [`${mux}batches_total{direction="received"}`]: this.batchesReceived,
      [`${p}streaming_unclaimed_bind_reaped_total`]: this.unclaimedBindReaped,
      [`${p}streaming_heartbeat_watchdog_firings_total`]: this.watchdogFirings,
      [`${p}streaming_producer_send_backpressure_total`]: this.producerSendBackpressure,
      [`${p}streaming_active_anchors`]: this.activeAnchors,
    };
    DROP_NAMES.forEach((n, i) => (s[`${mux}records_dropped_total{reason="${n}"}`] = this.recordsDropped[i]!));
    // Stragglers beside drops: the teardown race next to real routing loss.
    RECORD_TYPE_NAMES.forEach((n, i) => (s[`${mux}stragglers_total{record_type="${n}"}`] = this.stragglers[i]!));
    RECORD_TYPE_NAMES.forEach((n, i) => (s[`${mux}no_route_total{record_type="${n}"}`] = this.noRoute[i]!));
    s[`${p}streaming_overruns_total`] = this.overruns;
    RECORD_TYPE_NAMES.forEach((n, i) => (s[`${mux}records_sent_total{record_type="${n}"}`] = this.recordsSent[i]!));
    WAKE_NAMES.forEach((n, i) => (s[`${mux}batcher_wakes_total{source="${n}"}`] = this.batcherWakes[i]!));
    for (const [dir, h] of [
      ['sent', this.recordsPerBatchSent],
      ['received', this.recordsPerBatchReceived],
    ] as const) {
      let cum = 0;
      h.bounds.forEach((b, i) => {
        cum += h.counts[i]!;
        s[`${mux}records_per_batch_bucket{direction="${dir}",le="${b}"}`] = cum;
      });
      s[`${mux}records_per_batch_bucket{direction="${dir}",le="+Inf"}`] = h.count;
      s[`${mux}records_per_batch_sum{direction="${dir}"}`] = h.sum;
      s[`${mux}records_per_batch_count{direction="${dir}"}`] = h.count;
    }
    for (const [labels, v] of this.anchorOperations) s[`${p}streaming_anchor_operations_total{${labels}}`] = v;
    s[`${p}streaming_resumed_streams_total`] = this.resumedStreams;
    s[`${p}streaming_lingering_streams`] = this.lingeringStreams;
    s[`${p}streaming_replay_bytes`] = this.replayBytes?.() ?? 0;
    for (const [reason, v] of this.resumeFailures) s[`${p}streaming_resume_failed_total{reason="${reason}"}`] = v;
    return s;
  }

  /** The snapshot in the Prometheus text exposition format (`# TYPE` per family). */
  toPrometheus(): string {
    return toPrometheusText(toFamilies(this.snapshot()));
  }
}
