/**
 * The draining notice (docs/protocol.md §8.4): how a node tells its peers "I am draining: open no
 * new streams here; the live ones go on" without closing the link, and what a peer keeps of it.
 *
 * Wire: a messenger MESSAGE named {@link DRAIN_HANDLER} on every lane of the link, payload exactly
 * 5 bytes `[u8 phase][u32 ms]` (big-endian): phase 0 = draining (`ms` until its deadline), phase 1 =
 * the deadline passed (the streams still live end now, `ms` = 0). Sent only to peers whose HELLO
 * lists {@link DRAIN_KEY}; a malformed payload is counted and ignored. Every lane carries it so that
 * whatever the drain does to a stream on lane k (a refused claim, a slot closed at the deadline)
 * reaches the peer after the notice.
 *
 * The peer's side: {@link PeerDrains} remembers who drains and turns what the drain does to a
 * stream (an UnknownSlot close, a Dropped after the deadline) into `ERR_DRAINING`; a producer's slot
 * owner reports it to the sender and to a `send()` waiting on the slot alike.
 */
import type { LanemuxError } from '../errors.ts';
import type { EgressSlotOwner, Retirement } from '../mux/egress-slot.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { Messenger, PeerId } from '../messenger/types.ts';
import { StreamError } from './errors.ts';

/** Advertised in the HELLO's transport keys by a node that sends and understands draining notices. */
export const DRAIN_KEY = 'lanemux-drain-v1';
/** Handler name of the draining notice (a one-way MESSAGE). */
export const DRAIN_HANDLER = '_stream_drain';
/** Phase 0: the sender is draining. */
export const PHASE_DRAINING = 0;
/** Phase 1: the sender's drain deadline passed; its remaining streams end now. */
export const PHASE_DEADLINE = 1;
/** Length of a notice payload. */
export const DRAIN_NOTICE_BYTES = 5;

/** Peers remembered as draining (each until another instance of its worker links); the oldest is forgotten first. */
const MAX_DRAINING_PEERS = 4096;

/** The payload of a notice: `phase` and `ms` (clamped to a u32). */
export function encodeDrainNotice(phase: number, ms: number): Uint8Array {
  const out = new Uint8Array(DRAIN_NOTICE_BYTES);
  const v = Math.max(0, Math.min(0xffff_ffff, Math.round(ms)));
  out[0] = phase;
  new DataView(out.buffer).setUint32(1, v);
  return out;
}

/** A notice's phase and ms, or null when the payload is not one (wrong length or unknown phase). */
export function decodeDrainNotice(body: Uint8Array): { phase: number; ms: number } | null {
  if (body.byteLength !== DRAIN_NOTICE_BYTES) return null;
  const phase = body[0]!;
  if (phase !== PHASE_DRAINING && phase !== PHASE_DEADLINE) return null;
  return { phase, ms: new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(1) };
}

/** The error of a stream refused or ended by a drain (always retryable). */
export function drainingError(message: string, cause?: unknown): StreamError {
  return new StreamError('ERR_DRAINING', message, { retryable: true, ...(cause !== undefined ? { cause } : {}) });
}

/** The answer to an attach while the node drains (docs/protocol.md §8.4). */
export function drainRefusal(metrics: MuxMetrics): unknown {
  metrics.anchorOperation('attach', 'error', 'none');
  return {
    Err: {
      reason: 'the node is draining: it takes no new streams (open this one on another node)',
      code: 'ERR_DRAINING',
    },
  };
}

/** An attach that resumes a stream whose link was lost (docs/protocol.md §8.3): a draining node answers it. */
export function isResume(body: unknown): boolean {
  return typeof body === 'object' && body !== null && (body as { resume?: unknown }).resume !== undefined;
}

interface DrainingPeer {
  readonly instance: string;
  /** The link epoch a `draining` event was reported for. */
  epoch: number;
  /** Its drain deadline passed (phase 1 heard). */
  deadline: boolean;
}

/** What this node heard of its peers' drains: who is draining, and the errors that follow from it. */
export class PeerDrains {
  readonly #messenger: Messenger;
  readonly #metrics: MuxMetrics;
  readonly #peers = new Map<PeerId, DrainingPeer>();

  constructor(messenger: Messenger, metrics: MuxMetrics) {
    this.#messenger = messenger;
    this.#metrics = metrics;
    // Another instance of a draining worker (its restart) takes streams again.
    messenger.onPeer((info) => {
      const p = this.#peers.get(info.id);
      if (p !== undefined && p.instance !== info.instanceId) this.#peers.delete(info.id);
    });
  }

  /** A notice arrived from `from`. */
  onNotice(from: PeerId, payload: Uint8Array): void {
    const n = decodeDrainNotice(payload);
    if (n === null) {
      this.#metrics.drainNoticeMalformed++;
      return;
    }
    this.#metrics.drainNoticesReceived++;
    const info = this.#messenger.peer(from);
    if (info === undefined) return;
    let p = this.#peers.get(from);
    if (p === undefined || p.instance !== info.instanceId) {
      p = { instance: info.instanceId, epoch: -1, deadline: false };
      this.#peers.delete(from);
      this.#peers.set(from, p);
      if (this.#peers.size > MAX_DRAINING_PEERS) this.#peers.delete(this.#peers.keys().next().value!);
    }
    if (n.phase === PHASE_DEADLINE) p.deadline = true;
    // One event per link, whatever the number of lanes and notices.
    if (p.epoch !== info.epoch) {
      p.epoch = info.epoch;
      this.#messenger.peerDraining?.(from);
    }
  }

  #of(peer: PeerId): DrainingPeer | undefined {
    const p = this.#peers.get(peer);
    if (p === undefined) return undefined;
    const now = this.#messenger.peer(peer);
    return now === undefined || now.instanceId === p.instance ? p : undefined;
  }

  /** True while `peer` (its current or last instance) said it is draining. */
  draining(peer: PeerId): boolean {
    return this.#of(peer) !== undefined;
  }

  /** Throw `ERR_DRAINING` when `peer` is draining: a new stream toward it fails at once. */
  refuseToward(peer: PeerId): void {
    if (this.#of(peer) !== undefined)
      throw drainingError(`peer ${peer} is draining: it takes no new streams (open this one on another node)`);
  }

  /**
   * What a producer toward `peer` is told when its slot closes with `error`: an UnknownSlot from a
   * draining peer is the drain (a refused claim, or its consumer ended at the deadline).
   */
  slotClosed(peer: PeerId, error: LanemuxError | null): LanemuxError | null {
    if (error === null || error.code !== 'ERR_UNKNOWN_SLOT' || this.#of(peer) === undefined) return error;
    return drainingError(
      `peer ${peer} is draining and ended this stream (it refused it, or its drain deadline passed)`,
      error,
    );
  }

  /** What a consumer is told when the stream from `peer` ends without a terminal: the drain, after its deadline. */
  dropped(peer: PeerId | null | undefined): StreamError | null {
    if (peer == null || this.#of(peer)?.deadline !== true) return null;
    return drainingError(`the sender's node (${peer}) drained: its drain deadline passed before the stream finished`);
  }
}

/**
 * Waiters of a slot that a draining peer closed (UnknownSlot) fail with the drain's error, as the
 * sender then does (docs/protocol.md §8.4). False when the close is not the drain's.
 */
export function failForDrain(
  drains: PeerDrains,
  peer: PeerId,
  error: LanemuxError | null,
  waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>,
): boolean {
  const mapped = drains.slotClosed(peer, error);
  if (mapped === error) return false;
  for (const w of waiters) w.reject(mapped);
  return true;
}

/** A resumable stream's slot owner, told a draining peer's UnknownSlot as the drain (docs/protocol.md §8.4). */
export class DrainAwareOwner implements EgressSlotOwner {
  readonly #inner: EgressSlotOwner;
  readonly #peer: PeerId;
  readonly #drains: PeerDrains;
  constructor(inner: EgressSlotOwner, peer: PeerId, drains: PeerDrains) {
    this.#inner = inner;
    this.#peer = peer;
    this.#drains = drains;
  }
  onSlotClosed(error: LanemuxError | null): void {
    this.#inner.onSlotClosed(this.#drains.slotClosed(this.#peer, error));
  }
  onLifecycle(cancel: boolean): void {
    this.#inner.onLifecycle(cancel);
  }
  onRetired(outcome: Retirement): void {
    this.#inner.onRetired(outcome);
  }
  adoptWaiters(
    error: LanemuxError | null,
    waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>,
  ): boolean {
    return (
      this.#inner.adoptWaiters?.(error, waiters) === true || failForDrain(this.#drains, this.#peer, error, waiters)
    );
  }
}
