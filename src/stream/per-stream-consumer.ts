/**
 * The consumer's side of a per-stream (legacy, `tcp-stream`) connection: its frames go into the
 * anchor's own channel, with the mux's watchdog per connection and the stop and drop signals. Only a
 * node with a `perStream` transport listens for these (a consumer-only client has none).
 */
import type { LanemuxError } from '../errors.ts';
import { decodeFrameInto, FrameKind } from '../wire/frame.ts';
import type { DecodedFrame } from '../wire/frame.ts';
import { StreamAnchor } from './anchor.ts';
import type { StreamError } from './errors.ts';
import { PerStreamWatchdog, perStreamLost } from './per-stream.ts';
import type { PerStreamSink } from './per-stream.ts';
import type { NodeState } from './node-state.ts';

/** Consumer side of a per-stream connection: frames into the anchor's own channel. */
export function acceptPerStream(s: NodeState, anchorId: bigint, sessionId: bigint): PerStreamSink | null {
  const key = `${anchorId}:${sessionId}`;
  const bind = s.perStreamBinds.get(key);
  if (bind === undefined) return null;
  s.perStreamBinds.delete(key);
  const { anchor, buffer, feed } = bind;
  if (feed !== undefined && feed.ended) return null;
  const frame: DecodedFrame = { kind: 0, value: undefined, terminal: false };
  let ended = false;
  /** This side gave up on the connection (cancel, watchdog, a sender never read): not a lost link. */
  let aborted = false;
  const abort = (error: LanemuxError): void => {
    aborted = true;
    sink.abort?.(error);
  };
  const drop = (error: StreamError): void => {
    if (!ended) abort(error);
  };
  const stop = (): void => sink.stop?.();
  // The mux's watchdog, per connection: three silent windows end the stream Dropped (docs/protocol.md §9).
  const watchdog = new PerStreamWatchdog(
    s.runtime,
    s.config.heartbeatInterval,
    s.config.detectionMultiplier,
    () => buffer.length >= buffer.capacity,
    (error) => {
      // As on the mux, an MPSC anchor's senders never count firings.
      if (feed === undefined) s.metrics.watchdogFirings++;
      abort(error);
    },
  );
  const sink: PerStreamSink = {
    resume: null,
    frame: (body) => {
      watchdog.alive = true;
      decodeFrameInto(body, frame);
      const ok = buffer.push(frame.kind, frame.value, body.byteLength);
      frame.value = undefined;
      if (frame.terminal) ended = true;
      return ok && buffer.length < buffer.capacity;
    },
    end: (error) => {
      watchdog.stop();
      if (anchor instanceof StreamAnchor) {
        // Only this connection's own entries: a later sender of the anchor may hold them now.
        if (s.perStreamDrops.get(anchor) === drop) s.perStreamDrops.delete(anchor);
        if (s.perStreamStops.get(anchor) === stop) s.perStreamStops.delete(anchor);
      }
      // A connection lost without its terminal: with resume on, the stream ends saying this path cannot resume.
      if (!ended)
        buffer.pushForced(FrameKind.Dropped, !aborted && s.resumeOptions !== null ? perStreamLost(error) : undefined);
      buffer.close();
    },
  };
  // The transport installs `sink.stop` once this returns.
  if (bind.stop === true) queueMicrotask(() => sink.stop?.());
  if (feed !== undefined) {
    feed.lifecycle = (cancel) => {
      if (!cancel) sink.stop?.();
    };
    // One MPSC sender's connection: closing the feed drops just this connection.
    feed.release = (error) => {
      if (!ended) abort(error);
    };
    feed.onTake = () => {
      if (buffer.length < buffer.capacity) sink.resume?.();
    };
    return sink;
  }
  if (!(anchor instanceof StreamAnchor)) return null;
  bind.abort = drop;
  // Only the last sender to attach is live; one that detached needs neither (its connection is ending).
  if (anchor._isTail(buffer)) {
    s.perStreamDrops.set(anchor, drop);
    s.perStreamStops.set(anchor, stop);
  }
  anchor._setOnTake(buffer, () => {
    if (buffer.length < buffer.capacity) sink.resume?.();
  });
  return sink;
}
