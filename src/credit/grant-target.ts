/**
 * Which gate a grant credits (`grantTarget`).
 *
 * A stream key is `string | null`: `null` is "no stream", distinct from the empty string.
 */

/** A stream id as registered with a gate: text, or `null` for the request's unnamed stream. */
export type StreamKey = string | null;

/**
 * The index in `streams` of the gate a grant naming `named` credits, or -1 when it credits nothing.
 *
 * 1. `named` is in `streams` (option-aware equality: `null` equals `null`) → its index.
 * 2. `named` is `null` and `streams` has exactly one element → 0.
 * 3. Otherwise → -1: a named stream the request lacks (even when it has one stream), or an unnamed grant with
 *    0 or 2+ streams.
 *
 * `streams` are the gates of one request only; the router filters by request id first.
 */
export function grantTargetIndex(streams: readonly StreamKey[], named: StreamKey): number {
  const at = streams.indexOf(named);
  if (at >= 0) return at;
  if (named === null && streams.length === 1) return 0;
  return -1;
}

/**
 * The stream a grant credits: the matched key (which may be `null`, the unnamed stream), or `undefined` when it
 * credits nothing. See {@link grantTargetIndex}.
 */
export function grantTarget(streams: readonly StreamKey[], named: StreamKey): StreamKey | undefined {
  const at = grantTargetIndex(streams, named);
  return at < 0 ? undefined : streams[at];
}
