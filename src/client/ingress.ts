/**
 * The page's mux ingress (docs/protocol.md §10): applies the server's batches to the page's streams.
 * OpenSlot claims a bind, Data records reach their stream in frame_seq order within credit, the
 * owner's CloseSlot retires a slot; the replies (credit, closes, lifecycle) go back in one batch per
 * task (`replies.ts`). It also keeps the receive window (§3.8) and the watchdog (§10.8).
 *
 * Every peer byte is checked before it is kept: a record beyond credit, out of order, over the slot's
 * byte budget or over the receive window ends only its stream (`CloseSlot{ProtocolError}`); records
 * for slots it does not know are counted and dropped; a malformed batch keeps what came before the
 * error. Nothing here allocates from a declared length.
 *
 * A page has one lane (it offers one in its HELLO), so every batch arrives on lane 0 in order; records
 * sent by rendezvous (§8.1: over the batch cap) are not taken: the stream ends with
 * `ERR_TRANSPORT_ERROR` naming the size, and the producer is told (`LifecycleSlot{cancel}`).
 */
import type { LanemuxError } from '../errors.ts';
import { StreamError } from '../stream/errors.ts';
import { parseGap, transportError } from '../stream/live-feed.ts';
import { CloseReason, LifecycleAction, RecordType } from '../wire/constants.ts';
import { BatchReader } from '../wire/decoder.ts';
import { type DecodedFrame, FrameKind, decodeFrameAt } from '../wire/frame.ts';
import type { Bind } from './bind.ts';
import { Replies } from './replies.ts';
import { Entry, type ClientStream, type StreamHost } from './stream.ts';

/** Slots retired lately, remembered so that a late record is a straggler, not a drop (§10.9). */
const RETIRED_KEPT = 64;
/** Missed heartbeat windows in a row that end a stream (§10.8). */
const DETECTION_MULTIPLIER = 3;

/** What the ingress sends on the link. */
export interface IngressLink {
  sendBatch(payload: Uint8Array): boolean;
  sendMessage(name: string, payload: Uint8Array): boolean;
}

/** Counters a page can read (`client.metrics()`). */
export interface IngressCounters {
  /** Records for slots that just ended: the ordinary teardown race. */
  stragglers: number;
  /** Records for slots never known here, of another epoch, or malformed batches. */
  dropped: number;
  /** Streams ended for breaking the credit law, order, a budget or the window. */
  violations: number;
  /** Streams the watchdog ended (no heartbeat for three windows). */
  watchdog: number;
}

/** The page's ingress for its one server. */
export class Ingress implements StreamHost {
  /** Binds by `routing_session_id`: waiting for their OpenSlot, live, lost (resumable), or a remembered cancel. */
  readonly binds = new Map<bigint, Bind>();
  readonly replies: Replies;
  readonly counters: IngressCounters = { stragglers: 0, dropped: 0, violations: 0, watchdog: 0 };
  /** A stream's cancel or end (nothing more arrives for it), for the client's bookkeeping. */
  onFinished: (stream: ClientStream) => void = () => {};
  readonly #slots = new Map<number, Bind>();
  readonly #retired: number[] = [];
  readonly #link: IngressLink;
  readonly #reader = new BatchReader();
  readonly #frame: DecodedFrame = { kind: 0, value: undefined, terminal: false };
  /** The link epoch binds are counted against (0: no link). */
  #epoch = 0;
  /** The server's batch epoch on this link (hi, lo), -1 until its first batch. */
  #peerHi = -1;
  #peerLo = 0;
  readonly #window: number;
  #maxBatch = 0;
  #held = 0;
  #unreported = 0;

  constructor(link: IngressLink, window: number) {
    this.#link = link;
    this.#window = window;
    this.replies = new Replies((b) => link.sendBatch(b));
  }

  /** Live slots. */
  get liveSlots(): number {
    return this.#slots.size;
  }

  /** Bytes of Data bodies kept for the page's readers (the receive window's count). */
  get held(): number {
    return this.#held;
  }

  /** A link formed: a new epoch for the replies, the window starts empty. */
  linkUp(epoch: number, maxBatch: number): void {
    this.#epoch = epoch;
    this.#maxBatch = maxBatch;
    this.#peerHi = -1;
    this.#held = 0;
    this.#unreported = 0;
    this.replies.reset(epoch, maxBatch);
  }

  /** The link was lost: every bind it fed (or was about to) is suspended; the client resumes or ends them. */
  linkDown(): Bind[] {
    this.#epoch = 0;
    this.#slots.clear();
    this.#retired.length = 0;
    const lost: Bind[] = [];
    for (const b of this.binds.values()) {
      if (b.state === 'live' || b.state === 'waiting') {
        b.state = 'lost';
        lost.push(b);
      }
    }
    return lost;
  }

  /** Apply one batch from the server. */
  apply(payload: Uint8Array): void {
    const r = this.#reader;
    if (!r.reset(payload) || r.lane !== 0) {
      this.counters.dropped++;
      return;
    }
    if (this.#peerHi < 0) {
      this.#peerHi = r.epochHi;
      this.#peerLo = r.epochLo;
    } else if (r.epochHi !== this.#peerHi || r.epochLo !== this.#peerLo) {
      const older = r.epochHi < this.#peerHi || (r.epochHi === this.#peerHi && r.epochLo < this.#peerLo);
      if (older) {
        this.counters.dropped++;
        return;
      }
      // A newer epoch retires every slot of the older one: their streams end as a lost link's do.
      this.#peerHi = r.epochHi;
      this.#peerLo = r.epochLo;
      for (const b of [...this.#slots.values()])
        this.#end(b, dropped('its slot belonged to an older epoch of the server'), -1);
    }
    while (r.next()) {
      switch (r.type) {
        case RecordType.OpenSlot:
          this.#open(r.slot, r.anchorId(), r.sessionId());
          break;
        case RecordType.Data:
        case RecordType.SlotHeartbeat:
          this.#data(r.slot, r.frameSeq, r.payload, r.bodyOffset, r.bodyLength, r.type === RecordType.SlotHeartbeat);
          break;
        case RecordType.CloseSlot:
          this.#closeSlot(r.slot, r.closeReason);
          break;
        default:
          // CreditUpdate, LifecycleSlot: the page owns no slot they could name.
          this.#unknown(r.slot);
      }
    }
    if (r.error !== null) this.counters.dropped++;
    this.#report();
    this.replies.flush();
  }

  #open(slot: number, anchorId: bigint, session: bigint): void {
    const b = this.binds.get(session);
    if (b === undefined || b.stream.anchorId !== anchorId || b.state !== 'waiting') {
      // A cancel made before the OpenSlot arrived is answered with the cancel pair (§10.3).
      const cancelled = b !== undefined && b.state === 'done' && b.stream.cancelled && b.stream.anchorId === anchorId;
      this.replies.close(slot, CloseReason.UnknownSlot, session, cancelled ? LifecycleAction.Cancel : -1);
      if (cancelled) this.binds.delete(session);
      else this.counters.dropped++;
      return;
    }
    if (this.#slots.has(slot)) {
      this.replies.close(slot, CloseReason.ProtocolError);
      this.counters.violations++;
      return;
    }
    b.state = 'live';
    b.slot = slot;
    b.epoch = this.#epoch;
    b.heard = true;
    this.#slots.set(slot, b);
    if (b.stopPending) this.replies.stop(slot, session);
  }

  #data(slot: number, seq: number, buf: Uint8Array, off: number, len: number, slotHeartbeat: boolean): void {
    const b = this.#slots.get(slot);
    if (b === undefined || b.state !== 'live') {
      this.#unread(len);
      this.#unknown(slot);
      return;
    }
    if (seq !== b.nextSeq) {
      this.#unread(len);
      // Behind: a duplicate, dropped. Ahead: a record is missing (sent by rendezvous, or lost).
      if ((b.nextSeq - seq) >>> 0 < 0x8000_0000) this.counters.dropped++;
      else this.#violate(b, `record ${seq} arrived where ${b.nextSeq} was due`);
      return;
    }
    b.nextSeq = (seq + 1) >>> 0;
    const f = this.#frame;
    if (slotHeartbeat) {
      f.kind = FrameKind.Heartbeat;
      f.terminal = false;
    } else decodeFrameAt(buf, off, off + len, f);
    if (!b.spend(f.terminal)) {
      this.#unread(len);
      this.#violate(b, `record ${seq} was sent beyond the stream's credit`);
      return;
    }
    const s = b.stream;
    if (f.kind === FrameKind.Heartbeat || s.ended) {
      // Taken at once: its credit comes back as a read record's does.
      this.#unread(len);
      const d = b.take(0, false);
      if (d > 0) this.replies.credit(slot, d);
      return;
    }
    if (f.kind === FrameKind.Undecodable) {
      this.#unread(len);
      this.#cancelSlot(b, new StreamError('ERR_DESERIALIZATION', `record ${seq}: ${String(f.value)}`));
      return;
    }
    if (f.kind === FrameKind.SenderError && parseGap(f.value) !== null) {
      // A live producer's gap marker: the loss is counted, never read as an error (§10.9).
      s.gaps++;
      this.#unread(len);
      const d = b.take(0, false);
      if (d > 0) this.replies.credit(slot, d);
      return;
    }
    if (b.buffered > 0 && (b.bytes + len > b.budget || this.#held + len > this.#window + this.#maxBatch)) {
      this.#unread(len);
      this.#violate(
        b,
        b.bytes + len > b.budget
          ? 'the stream held more than its byte budget'
          : 'the server overran the receive window',
      );
      return;
    }
    b.buffered++;
    b.bytes += len;
    this.#held += len;
    // An arrival lowers what the producer holds: credit taken earlier may be due now (§10.7).
    const due = b.due();
    if (due > 0) this.replies.credit(slot, due);
    switch (f.kind) {
      case FrameKind.Item:
        s.push(b, Entry.Item, f.value, len);
        return;
      case FrameKind.SenderError:
        s.push(b, Entry.SenderError, f.value, len);
        return;
      case FrameKind.Finalized:
        b.state = 'done';
        s.push(b, Entry.End, null, len);
        return;
      case FrameKind.Dropped:
        b.state = 'done';
        s.push(b, Entry.End, dropped('the producer went away'), len);
        return;
      case FrameKind.Detached: {
        // The producer let go; the anchor stays open for the next attach (§8).
        b.state = 'done';
        if (s.bind === b) s.bind = null;
        this.taken(b, len);
        return;
      }
      default:
        b.state = 'done';
        s.push(b, Entry.End, transportError(f.value), len);
    }
  }

  #closeSlot(slot: number, reason: number): void {
    const b = this.#slots.get(slot);
    if (b === undefined || reason > CloseReason.PeerGone) {
      // UnknownSlot and ProtocolError name a slot the page would own: it owns none.
      this.#unknown(slot);
      return;
    }
    // TerminalSent after the terminal, or the producer left without one (PeerGone).
    this.#retire(b);
    if (b.state !== 'done' || reason === CloseReason.PeerGone) {
      b.state = 'done';
      b.stream.end(dropped('the producer went away without finishing the stream'));
    }
  }

  /** A record for a slot not live here: a straggler when it was lately retired, else a drop. */
  #unknown(slot: number): void {
    if (this.#retired.includes(slot)) this.counters.stragglers++;
    else this.counters.dropped++;
  }

  /** Bytes that arrived and were not kept: released to the window at once. */
  #unread(len: number): void {
    this.#unreported += len;
  }

  #retire(b: Bind): void {
    if (b.slot >= 0 && this.#slots.get(b.slot) === b) {
      this.#slots.delete(b.slot);
      this.#retired.push(b.slot);
      if (this.#retired.length > RETIRED_KEPT) this.#retired.shift();
    }
    this.binds.delete(b.session);
  }

  /** End `b`'s stream with `error` after what it holds; `reason` ≥ 0 also closes the slot toward the producer. */
  #end(b: Bind, error: LanemuxError, reason: number): void {
    if (reason >= 0 && b.state === 'live') this.replies.close(b.slot, reason);
    this.#retire(b);
    b.state = 'done';
    b.stream.end(error);
  }

  /** A peer's fault on one slot: that stream ends, the producer is told, the link stays up. */
  #violate(b: Bind, why: string): void {
    this.counters.violations++;
    this.#end(b, new StreamError('ERR_TRANSPORT_ERROR', why), CloseReason.ProtocolError);
  }

  /** End `b`'s stream and tell its producer with the cancel pair. */
  #cancelSlot(b: Bind, error: LanemuxError): void {
    if (b.state === 'live') this.replies.close(b.slot, CloseReason.UnknownSlot, b.session, LifecycleAction.Cancel);
    this.#retire(b);
    b.state = 'done';
    b.stream.end(error);
  }

  /** A rendezvous announcement (§8.1) for (epoch, slot, session): the page does not pull; the stream ends. */
  refuseStaged(slot: number, session: bigint, size: number): void {
    const b = this.#slots.get(slot);
    if (b === undefined || b.session !== session) return;
    this.#cancelSlot(
      b,
      new StreamError(
        'ERR_TRANSPORT_ERROR',
        `a ${size}-byte record is over what one batch carries; lanemux/client takes records up to the batch cap`,
      ),
    );
  }

  // StreamHost

  taken(b: Bind, bytes: number): void {
    // A lost link's records count in no window: the new link's starts empty.
    if (b.epoch === this.#epoch) {
      this.#held -= bytes;
      this.#unreported += bytes;
    }
    const d = b.take(bytes, true);
    if (d > 0) this.replies.credit(b.slot, d);
    this.#report();
  }

  signal(s: ClientStream, action: 0 | 1): void {
    const b = s.bind;
    if (action === 0) {
      if (b === null || b.state === 'done') return;
      if (b.state === 'live') this.replies.stop(b.slot, b.session);
      else b.stopPending = true;
      return;
    }
    if (b !== null && b.state !== 'done') {
      if (b.state === 'live') {
        this.replies.close(b.slot, CloseReason.UnknownSlot, b.session, LifecycleAction.Cancel);
        this.#retire(b);
      } else if (b.state === 'lost') this.binds.delete(b.session);
      // A waiting bind stays, 'done', until its accept window: a late OpenSlot gets the cancel pair.
      b.state = 'done';
    }
    this.onFinished(s);
  }

  ended(s: ClientStream): void {
    this.onFinished(s);
  }

  /**
   * Report released window bytes (§3.8, `_stream_window`) when a quarter window is due, or when a
   * sender blocked on a batch-sized record could otherwise wait forever.
   */
  #report(): void {
    const u = this.#unreported;
    if (u === 0 || this.#epoch === 0) return;
    if (u < this.#window / 4 && this.#held + u <= this.#window - this.#maxBatch) return;
    const p = new Uint8Array(8);
    new DataView(p.buffer).setBigUint64(0, BigInt(u));
    if (this.#link.sendMessage('_stream_window', p)) this.#unreported = 0;
  }

  /**
   * The watchdog (§10.8), run every `tickMs`: a live slot (or an answered attach not yet claimed)
   * that heard nothing for three windows of its heartbeat interval in a row ends `ERR_SENDER_DROPPED`;
   * one whose producer holds no credit, or may be held back by the receive window, is excused. An
   * unclaimed ticket waits `acceptWindowMs`; so does a remembered cancel.
   */
  sweep(now: number, tickMs: number, acceptWindowMs: number): void {
    const blocked = this.#held + this.#maxBatch > this.#window;
    for (const b of [...this.binds.values()]) {
      if (b.state === 'done' || (b.state === 'waiting' && !b.answered)) {
        if (now - b.since < acceptWindowMs) continue;
        this.binds.delete(b.session);
        if (b.state === 'waiting') {
          b.state = 'done';
          b.stream.end(dropped(`no producer opened the stream within ${acceptWindowMs} ms`));
        }
        continue;
      }
      if (b.state === 'lost') continue;
      const win = Math.ceil(Math.max(b.heartbeatMs, 10) / tickMs) * tickMs;
      if (now - b.windowStart < win) continue;
      b.windowStart = now;
      if (b.heard) b.missed = 0;
      else if (!(b.avail <= 0 || blocked)) b.missed++;
      b.heard = false;
      if (b.missed >= DETECTION_MULTIPLIER) {
        this.counters.watchdog++;
        this.#end(
          b,
          dropped(`no record or heartbeat for ${DETECTION_MULTIPLIER} × ${win} ms`),
          CloseReason.UnknownSlot,
        );
      }
    }
    this.replies.flush();
  }
}

function dropped(why: string): StreamError {
  return new StreamError('ERR_SENDER_DROPPED', why, { retryable: true });
}
