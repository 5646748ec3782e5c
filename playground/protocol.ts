/**
 * The playground's own messages between the page and the engine (`engine.mjs`), next to lanemux's.
 * Requests travel as MessagePack bodies; the engine's reports as JSON in a fire-and-forget message.
 */

/** `GET /engine.json`: how to reach the engine. */
export interface EngineInfo {
  readonly transport: 'websocket' | 'webtransport';
  /** `ws://…/lanemux` or `https://…` (WebTransport). */
  readonly address: string;
  readonly runtime: 'node' | 'deno';
  /** Side by side: `ws://…/` where each plain WebSocket carries one stream (no lanemux); absent if not offered. */
  readonly perStream?: string;
  /** WebTransport only: SHA-256 hashes (hex) of the engine's self-signed certificates. */
  readonly certHashes?: readonly string[];
}

/** `playground.metrics`: what the engine measured over the last report period (~250 ms). */
export interface EngineReport {
  readonly t: number;
  /** Bumps each time the engine rebuilds its node (a new flush policy). */
  readonly generation: number;
  /** Side by side: the streams on their own WebSockets, and their writes (one per token). Absent: not offered. */
  readonly perStream?: { readonly streams: number; readonly writesPerSec: number; readonly tokensPerSec: number };
  readonly config: { readonly flush: 'auto' | 'manual'; readonly rate: number; readonly tokens: number };
  readonly runtime: 'node' | 'deno';
  readonly activeStreams: number;
  readonly passesPerSec: number;
  /** Tokens carried to pages per second: data records the engine's mux wrote to the wire. */
  readonly tokensPerSec: number;
  /** Tokens the engine's passes staged per second (some may still be withheld for credit). */
  readonly tokensStagedPerSec: number;
  readonly batchesPerSec: number;
  readonly tokensTotal: number;
  readonly batchesTotal: number;
  /** Tokens the engine could not hand over (slot at its byte budget) and retried on a later pass. */
  readonly stalls: number;
  /** `velo_streaming_mux_withheld_records`: records waiting at the engine for credit. */
  readonly withheldRecords: number;
  readonly creditExhaustedTotal: number;
  /** `records_per_batch` (sent): bucket upper bounds, counts over the period, and since start. */
  readonly recordsPerBatch: {
    readonly bounds: readonly number[];
    readonly window: readonly number[];
    readonly total: readonly number[];
  };
  /** Per lane of the link to this page: live streams and bytes queued for the wire. */
  readonly lanes: ReadonlyArray<{ readonly streams: number; readonly bufferedBytes: number }>;
}
