/**
 * What the messenger keeps about one link (one epoch of one peer): its pending requests and pings,
 * the request handlers it runs for the peer, and the counters of the idle check. It is the link's
 * receiver: each message goes straight to the dispatcher, the link's end to the peer table.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import type { LinkReceiver, PeerLink } from '../transport/port.ts';
import type { Dispatcher } from './dispatch.ts';
import { Kind } from './envelope.ts';
import type { PeerTable } from './peers.ts';
import type { PeerId, PeerInfo } from './types.ts';

/** A `request` waiting for its reply. */
export interface PendingRequest {
  readonly name: string;
  resolve(value: unknown): void;
  reject(error: LanemuxError): void;
}

/** A ping waiting for its pong. */
export interface PendingPing {
  readonly start: number;
  resolve(rtt: number): void;
  reject(error: LanemuxError): void;
}

/** A running request handler: its controller (when the handler takes a signal) and whether it was aborted. */
export interface Inflight {
  readonly controller: AbortController | null;
  aborted: boolean;
}

/** Abort a running request handler once (a CANCEL, or the link's end). */
export function abortInflight(entry: Inflight | undefined, reason: unknown): void {
  if (entry === undefined || entry.aborted) return;
  entry.aborted = true;
  entry.controller?.abort(reason);
}

/** Everything about one link (one epoch of one peer). */
export class PeerState implements LinkReceiver {
  readonly link: PeerLink;
  readonly info: PeerInfo;
  readonly id: PeerId;
  readonly #dispatcher: Dispatcher;
  readonly #table: PeerTable;
  readonly requests = new Map<number, PendingRequest>();
  readonly pings = new Map<number, PendingPing>();
  /** Request handlers running, by request id (so CANCEL can abort them). */
  readonly inflight = new Map<number, Inflight>();
  /** Names we already sent an unknown-handler notice for (bounded): one notice per name, not per message. */
  readonly noticed = new Set<string>();
  nextId = 1;
  healthPending = false;
  contestPending = false;
  dead = false;
  /** Messages in either direction other than health checks (a counter: no clock per message). */
  activity = 0;
  activityAtTick = 0;
  /** Consecutive idle ticks with no activity. */
  idleTicks = 0;
  /** Messages received, health checks included (a contested link that says anything is alive). */
  received = 0;

  constructor(dispatcher: Dispatcher, table: PeerTable, link: PeerLink) {
    this.#dispatcher = dispatcher;
    this.#table = table;
    this.link = link;
    this.info = link.info;
    this.id = link.info.id;
  }

  /** A fresh u32 id not in use by `map` (ids wrap; 0 is skipped so it never means "none"). */
  allocId(map: Map<number, unknown>): number {
    for (;;) {
      const id = this.nextId;
      this.nextId = id === 0xffffffff ? 1 : id + 1;
      if (!map.has(id)) return id;
    }
  }

  message(lane: number, bytes: Uint8Array): void {
    const k = bytes[0];
    this.received++;
    if (k !== Kind.Ping && k !== Kind.Pong) this.activity++;
    this.#dispatcher.dispatch(this, lane, bytes);
  }

  gone(error: LanemuxError): void {
    this.#table.linkGone(this, error);
  }
}
