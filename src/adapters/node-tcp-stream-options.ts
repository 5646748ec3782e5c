/**
 * Options of the per-stream `tcp-stream` transport (`node-tcp-stream.ts`): the public shape, its
 * schema and defaults, and the resolved form both sides of a connection read.
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import type { FramePolicy } from '../transport/frame-pool.ts';
import { MAX_MAX_MESSAGE_SIZE } from '../transport/port.ts';
import { int } from '../validate.ts';

/** Options of `tcpStreamTransport`. */
export interface TcpStreamTransportOptions {
  /**
   * Listen on this host; it is also the host named in the endpoint handed to producers, so use an
   * address they can dial (not `0.0.0.0`). Defaults to `127.0.0.1`.
   */
  readonly host?: string;
  /** Listen on this port; 0 picks a free one. Defaults to 0. */
  readonly port?: number;
  /**
   * Largest frame body accepted (consumer: checked against the length prefix before allocating)
   * and written (producer). At most 256 MiB. Defaults to 1 MiB.
   */
  readonly maxFrameBytes?: number;
  /**
   * Socket high-water mark, both directions: a producer's `write` returns a drain promise once this
   * many bytes are queued, and a paused consumer lets Node buffer at most about this much.
   * Defaults to 64 KiB.
   */
  readonly highWaterMark?: number;
  /** Accepted connections held at once; more are reset on arrival. Defaults to 65,536. */
  readonly maxConnections?: number;
  /** An accepted socket must deliver its 16-byte preface within this, or it is reset. Defaults to 10,000 ms. */
  readonly prefaceTimeoutMs?: number;
  /** Time allowed for one dial. Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /**
   * Bounds on frames that have not arrived whole (consumer side): the pool their bytes are reserved
   * in, and the deadline of a large one; a connection over either is reset. Pass the node's policy to
   * bound them together with its other connections. Defaults to a policy of this transport's own
   * (64 MiB pool, frames over 64 KiB must complete within 10 s: `defaultFramePolicy`).
   */
  readonly framePolicy?: FramePolicy;
}

/** The options once parsed: every default filled in, the frame policy chosen. */
export type ResolvedTcpStreamOptions = Omit<z.output<typeof tcpStreamOptionsSchema>, 'framePolicy'> & {
  readonly framePolicy: FramePolicy;
};

/** The schema of {@link TcpStreamTransportOptions}, with its defaults. */
export const tcpStreamOptionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  maxFrameBytes: z._default(int(1, MAX_MAX_MESSAGE_SIZE), 1024 * 1024),
  highWaterMark: z._default(int(1, 2 ** 30), 64 * 1024),
  maxConnections: z._default(int(1, 2 ** 24), 65_536),
  prefaceTimeoutMs: z._default(int(1, 600_000), 10_000),
  connectTimeoutMs: z._default(int(1, 600_000), 10_000),
  framePolicy: z.optional(
    z.custom<FramePolicy>(
      (v) => typeof v === 'object' && v !== null && 'pool' in v && 'largeFrameBytes' in v && 'deadlineMs' in v,
      'not a FramePolicy ({ pool, largeFrameBytes, deadlineMs })',
    ),
  ),
});
