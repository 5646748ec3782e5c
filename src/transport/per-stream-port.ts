/**
 * The per-stream port (docs/protocol.md §9): what a per-stream transport implements — one dedicated
 * connection per stream, key `tcp-stream` — and what the stream layer drives. The Node TCP
 * implementation is `src/adapters/node-tcp-stream.ts`.
 *
 * @packageDocumentation
 */
import type { Runtime } from '../runtime/runtime.ts';
import type { LanemuxError } from '../errors.ts';

/** Where the consumer side of one per-stream connection delivers. */
export interface PerStreamSink {
  /** One StreamFrame body arrived. Return false to pause reading (the anchor buffer is full). */
  frame(body: Uint8Array): boolean;
  /** The connection ended (error null: clean end after the terminal). */
  end(error: LanemuxError | null): void;
  /** Set by the transport: the sink calls it when it can take frames again. */
  resume: (() => void) | null;
  /**
   * Set by the transport: the sink calls it to drop the connection (the anchor was cancelled or
   * failed, or its watchdog fired). The transport then ends the sink with this error.
   */
  abort?: ((error: LanemuxError) => void) | null;
  /**
   * Set by the transport (right after `accept` returns), where its wire can carry a stop: the sink
   * calls it to ask the producer to finish (`requestStop`). The first call per connection sends it;
   * later calls, and calls after the end, do nothing.
   */
  stop?: (() => void) | null;
}

/** The producer side of one per-stream connection. */
export interface PerStreamConnection {
  /** Write one StreamFrame body: true when the socket took it, else a promise of its drain. */
  write(body: Uint8Array): true | Promise<void>;
  /** End the stream after the last frame (graceful). */
  end(): void;
  /** Tear the connection down now. */
  destroy(error?: LanemuxError): void;
  /** Called once when the connection closes (error null: clean). */
  onClose(listener: (error: LanemuxError | null) => void): void;
  /**
   * Called once when the consumer asks the producer to stop (its `requestStop`). Optional: a
   * transport whose wire cannot carry a stop leaves it out.
   */
  onStop?(listener: () => void): void;
}

/** A per-stream transport: listener (consumer side) and dialer (producer side). */
export interface PerStreamTransport {
  /** The transport key (`tcp-stream`). */
  readonly key: string;
  /**
   * The node's runtime, given by `createNode` before `listen` or `connect`: the transport's timers
   * (dial and preface deadlines) run on it, so a manual clock drives them too. Optional: a transport
   * without timers leaves it out; one that is never given a runtime uses the current runtime's.
   */
  setRuntime?(runtime: Runtime): void;
  /** Start listening; resolves with the endpoint consumers put in attach answers. */
  listen(accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null): Promise<string>;
  /** Dial a consumer's endpoint for (anchor, session). */
  connect(
    endpoint: string,
    anchorId: bigint,
    sessionId: bigint,
    options?: { signal?: AbortSignal },
  ): Promise<PerStreamConnection>;
  /** Close the listener and every connection. */
  close(): Promise<void>;
  /** Writes made (one per frame on this path), for the coalescing ratio. */
  readonly writes: number;
}
