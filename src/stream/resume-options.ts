/**
 * Options of transparent stream resume (docs/protocol.md §8.3): the resume window, the
 * producer's replay caps, and the transport key a node advertises in its HELLO when resume is on.
 */
import * as z from '../schema.ts';
import { int } from '../validate.ts';

/** Advertised in the HELLO's transport keys by a node with resume on; resume applies only between two such nodes. */
export const RESUME_KEY = 'lanemux-resume-v1';

/** Default resume window, ms. */
export const DEFAULT_RESUME_WINDOW_MS = 30_000;
/** Default node-wide replay cap, bytes (64 MiB). */
export const DEFAULT_MAX_REPLAY_BYTES = 64 * 1024 * 1024;
/** Longest resume window, ms: one day. */
export const MAX_RESUME_WINDOW_MS = 86_400_000;

/** Default bytes of history a producer keeps per stream for a re-attach, when history is on (64 KiB). */
export const DEFAULT_HISTORY_BYTES_PER_STREAM = 64 * 1024;
/** Default time a finished stream's history is kept for a re-attach, ms (two minutes). */
export const DEFAULT_HISTORY_KEEP_MS = 120_000;

/**
 * `resume.history`: the producer keeps each stream's recent items (not only those in flight) so that
 * a new consumer — a reloaded page, a new node — can re-attach from a resume token and an offset
 * (docs/protocol.md §8.4). Counted against `maxReplayBytes`; when that is full the oldest finished
 * stream's history goes first.
 */
export interface HistoryOptions {
  /** Bytes of items kept per stream (the oldest go first). Defaults to 65,536. */
  readonly bytesPerStream?: number;
  /** How long a finished stream stays re-attachable, ms. Defaults to 120,000. */
  readonly keepMs?: number;
}

/** `createNode({ resume })`: transparent resume of mux streams across a lost link. */
export interface ResumeOptions {
  /**
   * How long a stream whose link was lost waits for the same peer (same worker, same instance) to
   * link again, ms; 0 turns resume off. Defaults to 30,000.
   */
  readonly windowMs?: number;
  /**
   * Bytes of sent items a producer keeps per stream in its replay ring, to send again after a resume
   * (filled from its lane's replay log when a link is lost, or kept from the start with history).
   * Defaults to the slot byte budget (`mux.slotByteBudget`).
   */
  readonly maxReplayBytesPerStream?: number;
  /**
   * Bytes of sent items a producer keeps over all its streams, in the lanes' replay logs and the
   * streams' rings (the oldest go first; `replay_bytes` reports it). Defaults to 64 MiB.
   */
  readonly maxReplayBytes?: number;
  /**
   * Keep a bounded history per stream for re-attaching after a page reload (`true`: the defaults of
   * {@link HistoryOptions}). Off by default: a stream keeps only what a lost link can take.
   */
  readonly history?: boolean | HistoryOptions;
}

/** Resume as a node runs it. */
export interface ResolvedResume {
  readonly windowMs: number;
  readonly maxReplayBytesPerStream: number;
  readonly maxReplayBytes: number;
  /** Null: no history (re-attach refused). */
  readonly history: { readonly bytesPerStream: number; readonly keepMs: number } | null;
}

/** The `resume` field of createNode's options (validated there with the others). */
export const resumeSchema = z.optional(
  z.union([
    z.literal(false),
    z.strictObject({
      windowMs: z.optional(int(0, MAX_RESUME_WINDOW_MS)),
      maxReplayBytesPerStream: z.optional(int(1, 2 ** 40)),
      maxReplayBytes: z.optional(int(1, 2 ** 48)),
      history: z.optional(
        z.union([
          z.boolean(),
          z.strictObject({
            bytesPerStream: z.optional(int(1, 2 ** 32)),
            keepMs: z.optional(int(0, MAX_RESUME_WINDOW_MS)),
          }),
        ]),
      ),
    }),
  ]),
);

/** Resolve validated options; null when resume is off (`false`, or `windowMs: 0`). */
export function resolveResume(o: ResumeOptions | false | undefined, slotByteBudget: number): ResolvedResume | null {
  if (o === false) return null;
  const windowMs = o?.windowMs ?? DEFAULT_RESUME_WINDOW_MS;
  if (windowMs === 0) return null;
  return {
    windowMs,
    maxReplayBytesPerStream: o?.maxReplayBytesPerStream ?? slotByteBudget,
    maxReplayBytes: o?.maxReplayBytes ?? DEFAULT_MAX_REPLAY_BYTES,
    history:
      o?.history === undefined || o.history === false
        ? null
        : {
            bytesPerStream:
              (o.history === true ? undefined : o.history.bytesPerStream) ?? DEFAULT_HISTORY_BYTES_PER_STREAM,
            keepMs: (o.history === true ? undefined : o.history.keepMs) ?? DEFAULT_HISTORY_KEEP_MS,
          },
  };
}
