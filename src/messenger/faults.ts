/**
 * What goes wrong with no caller to reject: handlers and listeners that throw (reported through
 * `onError`, or one console warning while nobody listens), NOTICEs in both directions
 * (docs/protocol.md §4.5), envelopes the peer broke (the link is closed), and the counters of
 * `stats()` that every part of the messenger bumps.
 *
 * @packageDocumentation
 */
import { TransportError, describeThrown, toError } from '../transport/errors.ts';
import type { RefusalReason } from '../transport/transport.ts';
import { swallow } from './admission.ts';
import { Kind, decodeErrorBody, encodeErrorBody } from './envelope.ts';
import { RemoteError } from './errors.ts';
import type { PeerState } from './peer-state.ts';
import type { MessengerErrorEvent, MessengerStats, PeerId } from './types.ts';

/** The no-caller channel of one messenger (see the file comment). */
export class Faults {
  /** The counters of `stats()` (but `refused`), bumped in place. */
  readonly counts = {
    handlerErrors: 0,
    unknownHandler: 0,
    remoteNotices: 0,
    lateReplies: 0,
    malformed: 0,
    idleClosed: 0,
  };
  /** Connections the transport refused or evicted, by reason. */
  readonly refused: Record<RefusalReason, number> = {
    unauthenticated: 0,
    worker_id_in_use: 0,
    handshake_evicted: 0,
    link_evicted: 0,
    frame_deadline: 0,
  };
  readonly #selfId: PeerId;
  readonly #listeners = new Set<(event: MessengerErrorEvent) => void>();
  #warned = false;

  constructor(selfId: PeerId) {
    this.#selfId = selfId;
  }

  onError(listener: (event: MessengerErrorEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  stats(): MessengerStats {
    return { ...this.counts, refused: { ...this.refused } };
  }

  /** A local handler or listener threw: count it and report it. */
  reportError(source: 'handler', error: unknown, peer: PeerId | undefined, handler: string): void {
    this.counts.handlerErrors++;
    this.emitError({ source, peer, handler, error: toError(error) });
  }

  emitError(event: MessengerErrorEvent): void {
    if (this.#listeners.size === 0) {
      // Nobody listens: say it once so a broken handler is not silent, then only count.
      if (!this.#warned) {
        this.#warned = true;
        console.warn(
          `lanemux messenger: ${event.source} error${event.handler ? ` in "${event.handler}"` : ''}: ${describeThrown(event.error)} (further errors are only counted; use onError)`,
        );
      }
      return;
    }
    for (const l of [...this.#listeners]) {
      try {
        l(event);
      } catch {
        // A failing error listener has nowhere left to report to.
      }
    }
  }

  /** A message for a handler nobody registered: tell the sender once per name (bounded). */
  unknown(st: PeerState, name: string): void {
    this.counts.unknownHandler++;
    if (st.noticed.has(name) || st.noticed.size >= 64) return;
    st.noticed.add(name);
    const body = encodeErrorBody({
      code: 'ERR_UNKNOWN_HANDLER',
      message: `no handler named "${name}" on worker ${this.#selfId}; such messages are dropped`,
      handler: name,
    });
    const notice = new Uint8Array(1 + body.byteLength);
    notice[0] = Kind.Notice;
    notice.set(body, 1);
    swallow(st.link.send(0, notice));
  }

  /** A NOTICE from the peer about one of our messages. */
  onNotice(st: PeerState, lane: number, bytes: Uint8Array): void {
    const body = decodeErrorBody(bytes.subarray(1));
    if (body === undefined) return this.malformed(st, lane, 'NOTICE with an invalid body');
    this.counts.remoteNotices++;
    this.emitError({
      source: 'remote',
      peer: st.id,
      handler: body.handler,
      error: new RemoteError(st.id, body.code, `peer ${st.id} reports: ${body.message}`, {
        retryable: body.retryable ?? false,
      }),
    });
  }

  /** The peer broke the envelope: GOAWAY with the reason and close the link. */
  malformed(st: PeerState, lane: number, what: string): void {
    this.counts.malformed++;
    st.link.close(
      new TransportError('ERR_MALFORMED_ENVELOPE', `malformed envelope on lane ${lane} from ${st.id}: ${what}`),
    );
  }
}
