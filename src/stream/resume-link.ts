/**
 * The producer's end of a resumable mux stream (docs/protocol.md §8.3): the sender's port
 * and its slot's owner in one. While live, the records its slot stages are kept by the lane's
 * replay log (mux/replay-log.ts) until the consumer is known to have them, and handed back here
 * when the link is lost; a stream with history, or one that sent a record by rendezvous, keeps them
 * in its own replay ring as its slot takes them. When the slot is lost with its link, the stream is
 * suspended instead of failed (sends go on into the ring, bounded), and when the same peer links
 * again the attach is made again naming the old session: the consumer answers how many items it
 * has, and the rest is sent again on the new slot. After its terminal the stream lingers for the
 * resume window, as the terminal may be lost with the link too.
 */
import type { LanemuxError } from '../errors.ts';
import type { PeerId, PeerInfo } from '../messenger/types.ts';
import { EgressKind, Offer } from '../mux/egress-slot.ts';
import { closedOnPurpose } from '../mux/errors.ts';
import type { ReplayOwner } from '../mux/replay-log.ts';
import type { EgressSlot, EgressSlotOwner, Retirement } from '../mux/egress-slot.ts';
import { encodeItemBody } from '../wire/plain-item.ts';
import { FRAME_DETACHED, FRAME_FINALIZED, FrameKind, encodeFrame } from '../wire/frame.ts';
import { ResumeFailedError, StreamError, type ResumeFailure } from './errors.ts';
import { slotRoom, type SenderPort } from './port.ts';
import { ReplayRing, type ReplayBudget } from './replay-ring.ts';
import type { StreamSender } from './sender.ts';
import type { AnchorHandle } from './handle.ts';

/** Records a ring without history may hold past what a lost link can take before it is trimmed. */
export const TRIM_SLACK = 8;

const LIVE = 0;
const SUSPENDED = 1;
const RESUMING = 2;
const ENDED = 3;

/** What a resume attach answered: the new slot's terms and how many items the consumer has. */
export interface ResumeAnswer {
  readonly session: bigint;
  readonly credit: number;
  readonly budget: number;
  readonly lane: number;
  readonly offset: number;
}

/** What a resumable stream needs from its node. */
export interface ResumeHost {
  readonly windowMs: number;
  /** How long a finished stream keeps its ring (the window, or the history's keep time). */
  readonly lingerMs: number;
  /** Per-stream history for re-attaching (docs/protocol.md §8.4), or null. */
  readonly history: { readonly bytesPerStream: number } | null;
  /** The stream that had `token` ended: the token names nothing any more. */
  forgetToken(token: string): void;
  readonly budget: ReplayBudget;
  readonly maxReplayBytesPerStream: number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(t: unknown): void;
  /** The peer's live link, if any. */
  peerNow(peer: PeerId): PeerInfo | undefined;
  /** Watch for `link`'s peer linking again (calls `peerUp`), or stop. */
  watch(link: ResumeLink, on: boolean): void;
  /** Keep the stream after its terminal (its ring) for the resume window, or stop. */
  linger(link: ResumeLink, on: boolean): void;
  /**
   * The batch with `link`'s terminal was handed to the link of `epoch` on `lane`: call
   * `terminalConfirmed(gen)` once a PING behind it there is answered (docs/protocol.md §8.3).
   */
  confirmTerminal(link: ResumeLink, lane: number, epoch: number, gen: number): void;
  /**
   * The attach again, naming `session` and how many items were sent. Resolves with the answer,
   * `'unknown'` when the consumer does not know the session, or a refusal's reason; rejects when
   * the request itself failed (the link went again: the stream stays suspended).
   */
  reattach(
    link: ResumeLink,
    session: bigint,
    sent: number,
    from: number,
  ): Promise<ResumeAnswer | { refused: string; why: string | undefined }>;
  /** Open the new slot of a resumed stream. */
  openSlot(link: ResumeLink, answer: ResumeAnswer, owner: EgressSlotOwner): Promise<EgressSlot>;
  resumed(): void;
  failed(reason: ResumeFailure): void;
}

/** One slot's callbacks, and its records in the lane's replay log: a slot the stream has left behind is ignored. */
class SlotOwner implements EgressSlotOwner, ReplayOwner {
  readonly #link: ResumeLink;
  readonly gen: number;
  replayRound = 0;
  constructor(link: ResumeLink, gen: number) {
    this.#link = link;
    this.gen = gen;
  }
  recover(kind: number, payload: unknown): void {
    this.#link._replayRecover(this.gen, kind, payload);
  }
  recovered(live: boolean): void {
    this.#link._replayRecovered(this.gen, live);
  }
  onSlotClosed(error: LanemuxError | null): void {
    this.#link._slotClosed(this.gen, error);
  }
  onLifecycle(cancel: boolean): void {
    this.#link._lifecycle(this.gen, cancel);
  }
  onRetired(outcome: Retirement): void {
    this.#link._retired(this.gen, outcome);
  }
  adoptWaiters(
    error: LanemuxError | null,
    waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>,
  ): boolean {
    return this.#link._adoptWaiters(this.gen, error, waiters);
  }
}

/**
 * True for what a lost link closes a slot with: epoch death, or the peer gone — not a peer that
 * closed on purpose (`ERR_CLOSED` is the loss's cause), not a cancel, not a protocol fault.
 */
function linkLost(error: LanemuxError): boolean {
  return (error.code === 'ERR_EPOCH_DEATH' || error.code === 'ERR_SENDER_DROPPED') && !closedOnPurpose(error);
}

/** The producer's end of one resumable mux stream. */
export class ResumeLink implements SenderPort {
  // First the fields every record offered reads (V8 lays fields out as declared).
  #state = LIVE;
  #slot: EgressSlot;
  /** Items handed over so far. */
  #sent = 0;
  /**
   * The live slot's records are kept by its lane's replay log, not by the ring (empty meanwhile):
   * never with history, nor after a record went by rendezvous.
   */
  #logMode = false;
  /** The consumer's peer (another after a re-attach). */
  peer: PeerId;
  /** The instance of the peer the stream was opened to: another one is a restart. */
  instanceId: string;
  /** The anchor the stream feeds. */
  handle: AnchorHandle;
  /** The stream's resume token when the node keeps history (docs/protocol.md §8.4), else null. */
  token: string | null = null;
  /** History is kept: the ring is trimmed by its byte cap only, never to what the consumer has. */
  readonly #history: boolean;
  /** The slot generation whose records the log keeps. */
  #logGen = -1;
  /** A record went by rendezvous: the ring keeps the records from then on. */
  #ringOnly = false;
  /** The first slot's owner (its records go to the log). */
  #firstOwner: SlotOwner | null = null;
  /** The link epoch the stream's latest slot was opened on. */
  epoch: number | undefined;
  readonly #host: ResumeHost;
  readonly #sender: StreamSender<unknown>;
  #gen = 0;
  #session: bigint;
  /** The stream's credit C: C+1 records may be sent while it is suspended. */
  readonly #credit: number;
  readonly #ring: ReplayRing;
  /** Records sent while suspended or resuming. */
  #down = 0;
  /** The terminal handed over (a FrameKind), or 0, and its body. */
  #terminal = 0;
  #terminalBody: Uint8Array = FRAME_FINALIZED;
  /** A live feed's withhold depth, for every slot the stream has (see `SenderPort.holdBack`). */
  #depth = Number.POSITIVE_INFINITY;
  /** The terminal went out on the current slot (the stream lingers). */
  #terminalSent = false;
  /** A Discarded retirement of the current slot waits for its close to say whether the stream resumes. */
  #discardPending = false;
  #error: LanemuxError | null = null;
  #lossError: LanemuxError | null = null;
  #timer: unknown = null;
  #waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }> | null = null;
  /** Waits for room (a relay above the stream): woken by the slot while live, or by the resume. */
  #roomWaiter: (() => void) | null = null;

  constructor(
    host: ResumeHost,
    sender: StreamSender<unknown>,
    peer: PeerId,
    instanceId: string,
    handle: AnchorHandle,
    session: bigint,
    credit: number,
    /** Keep the node's history for a re-attach (docs/protocol.md §8.5): single-sender streams only. */
    history = true,
  ) {
    this.handle = handle;
    this.#host = host;
    this.#sender = sender;
    this.peer = peer;
    this.instanceId = instanceId;
    this.#session = session;
    this.#credit = credit;
    this.#history = history && host.history !== null;
    const cap = Math.max(host.maxReplayBytesPerStream, this.#history ? (host.history?.bytesPerStream ?? 0) : 0);
    this.#ring = new ReplayRing(credit + 2 + TRIM_SLACK, cap, host.budget);
    // Set by `bindSlot` before any frame is offered.
    this.#slot = null as unknown as EgressSlot;
  }

  /** The owner to open the first slot with. */
  firstOwner(): EgressSlotOwner {
    return (this.#firstOwner = new SlotOwner(this, this.#gen));
  }

  /** The first slot opened. */
  bindSlot(slot: EgressSlot, epoch: number | undefined): void {
    this.#slot = slot;
    this.epoch = epoch;
    const owner = this.#firstOwner;
    if (owner !== null && !this.#history && owner.gen === this.#gen) this.#useLog(slot, owner);
  }

  /** The lane's replay log keeps `slot`'s records from here; the ring holds none meanwhile. */
  #useLog(slot: EgressSlot, owner: SlotOwner): void {
    slot.replay = owner;
    this.#logGen = owner.gen;
    this.#logMode = true;
    this.#ring.trim(this.#sent);
  }

  /** The stream's current session (the old one while it is suspended). */
  get session(): bigint {
    return this.#session;
  }

  /** Items handed over so far. */
  get sent(): number {
    return this.#sent;
  }

  /** Bytes its own ring holds (0 while the lane's replay log keeps its records). */
  get ringBytes(): number {
    return this.#ring.bytes;
  }

  /** True while the stream waits for its link to come back. */
  get suspended(): boolean {
    return this.#state === SUSPENDED || this.#state === RESUMING;
  }

  // ───────────── SenderPort ─────────────

  get paused(): boolean {
    return this.#state === LIVE ? this.#slot.paused : this.#down > this.#credit;
  }

  get closeError(): LanemuxError | null {
    if (this.#state === ENDED) return this.#error;
    return this.#state === LIVE && this.#slot.closed ? this.#slot.closeError : null;
  }

  /** Nothing is taken for the slot while the stream is suspended: the relay above waits. */
  get room(): number {
    return this.#state === LIVE ? slotRoom(this.#slot) : 0;
  }

  notifyRoom(fn: () => void): void {
    if (this.#state === ENDED) return;
    // Kept here, not on the slot: a slot lost with its link drops its waiter, and the resume wakes this one.
    this.#roomWaiter = fn;
    if (this.#state === LIVE && !this.#slot.closed) this.#slot.roomWaiter = this.#slotRoom ??= () => this.#wakeRoom();
  }

  /** The slot's room waiter (made on first use: only a relay waits for room). */
  #slotRoom: (() => void) | null = null;

  get withheld(): number {
    return this.#state === LIVE ? this.#slot.queued : this.#down;
  }

  #wakeRoom(): void {
    const w = this.#roomWaiter;
    if (w === null) return;
    this.#roomWaiter = null;
    w();
  }

  offer(kind: number, value: unknown): Offer {
    if (this.#state === ENDED) return Offer.Closed;
    let ek: number;
    let payload: unknown;
    let size: number;
    switch (kind) {
      case FrameKind.Item:
        if (typeof value === 'string') {
          ek = EgressKind.ItemString;
          payload = value;
          size = value.length;
        } else if (value instanceof Uint8Array) {
          ek = EgressKind.ItemBytes;
          payload = value;
          size = value.byteLength;
        } else {
          ek = EgressKind.Body;
          const body = encodeItemBody(value);
          payload = body;
          size = body.byteLength;
        }
        break;
      case FrameKind.SenderError: {
        ek = EgressKind.Body;
        const body = encodeFrame({ kind: 'SenderError', message: String(value) });
        payload = body;
        size = body.byteLength;
        break;
      }
      case FrameKind.Heartbeat:
        if (this.#state === LIVE) this.#slot.batcher.heartbeat(this.#slot);
        return Offer.Ok;
      default:
        return this.#offerTerminal(kind, value);
    }
    if (this.#state === LIVE) {
      const slot = this.#slot;
      const r = slot.batcher.offer(slot, ek, payload);
      if (r === Offer.Ok || r === Offer.Wait) {
        this.#sent++;
        // The lane's replay log has it (or the slot's withheld queue, which a lost link hands back too).
        if (this.#logMode) return r;
        const ring = this.#ring;
        ring.push(ek, payload, size);
        // A lost link takes at most the records whose credit has not come back (the consumer reads,
        // and grants, in order) and those still withheld: C+1 − available + queued. Not once the
        // receiver grew the window (credit ever above C, §10.7.1): a grant may then be growth, not
        // records read, so the ring keeps what its byte cap allows. Trimmed TRIM_SLACK records at a
        // time: dropping one per record offered cost a store and a budget update per token.
        if (!this.#history && slot.ledger.peak < slot.inletDepth) {
          const keep = slot.inletDepth - slot.ledger.dataAvailable + slot.queued;
          if (ring.length > keep + TRIM_SLACK) ring.keepLast(keep);
        }
      }
      return r;
    }
    // Suspended: into the ring only, C+1 records at most (the inlet's depth).
    if (this.#down > this.#credit) return Offer.Refused;
    this.#ring.push(ek, payload, size);
    this.#sent++;
    this.#down++;
    return this.#down > this.#credit ? Offer.Wait : Offer.Ok;
  }

  #offerTerminal(kind: number, value: unknown): Offer {
    // Finalized, Detached, and a live feed's TransportError reach a port as terminals (Dropped is `depart`).
    this.#terminal = kind;
    this.#terminalBody = terminalBody(kind, value);
    if (this.#state !== LIVE) return Offer.Ok;
    return this.#slot.batcher.offer(this.#slot, EgressKind.Terminal, this.#terminalBody);
  }

  holdBack(depth: number): void {
    this.#depth = depth;
    this.#slot.withholdDepth = depth;
  }

  waitWritable(): Promise<void> {
    if (this.#state === ENDED) return Promise.reject(this.#error);
    // A slot lost with its link hands its waiters over (`adoptWaiters`): they wait for the resume.
    if (this.#state === LIVE) return this.#slot.waitWritable();
    return this.#down > this.#credit ? this.#whenUp() : Promise.resolve();
  }

  depart(): void {
    if (this.#state === ENDED) return;
    if (this.#state === LIVE && !this.#terminalSent) this.#slot.batcher.depart(this.#slot);
    this.#end(null);
  }

  #whenUp(): Promise<void> {
    return new Promise((resolve, reject) => (this.#waiters ??= []).push({ resolve, reject }));
  }

  #wake(error: LanemuxError | null): void {
    const w = this.#waiters;
    if (w === null) return;
    this.#waiters = null;
    for (const x of w)
      if (error === null) x.resolve();
      else x.reject(error);
  }

  // ───────────── slot callbacks ─────────────

  /** @internal A record of slot `gen` the consumer may lack, from the lane's replay log or the slot's queue, oldest first. */
  _replayRecover(gen: number, kind: number, payload: unknown): void {
    if (gen !== this.#logGen || !this.#logMode || this.#state === ENDED) return;
    this.#ring.push(kind, payload, typeof payload === 'string' ? payload.length : (payload as Uint8Array).byteLength);
  }

  /**
   * @internal Every record of slot `gen` the consumer may lack is in the ring, which keeps them from
   * here; `live`: the slot goes on (a record went by rendezvous), so it does for the stream's life.
   */
  _replayRecovered(gen: number, live: boolean): void {
    if (gen !== this.#logGen || !this.#logMode) return;
    if (live) this.#ringOnly = true;
    this.#leaveLog();
  }

  #leaveLog(): void {
    this.#logMode = false;
    // What the log gave back is the newest records the stream handed over (older ones arrived).
    this.#ring.renumber(this.#sent);
    this.#slot.replay = null;
  }

  /** @internal The slot closes under waiting producers: a lost link keeps them waiting for the resume. */
  _adoptWaiters(
    gen: number,
    error: LanemuxError | null,
    waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>,
  ): boolean {
    if (gen !== this.#gen || this.#state === ENDED || error === null || !linkLost(error)) return false;
    const own = (this.#waiters ??= []);
    for (const w of waiters) own.push(w);
    return true;
  }

  /** @internal */
  _slotClosed(gen: number, error: LanemuxError | null): void {
    if (gen !== this.#gen || this.#state === ENDED) return;
    const discard = this.#discardPending;
    this.#discardPending = false;
    if (error === null) {
      // The terminal went out: keep what the consumer may still lack until the window passes.
      this.#terminalSent = true;
      this.#host.linger(this, true);
      this.#sender._closed(null);
      return;
    }
    if (linkLost(error)) {
      this.#suspend(error);
      return;
    }
    this.#end(error);
    if (discard) this.#sender._retire('Discarded');
  }

  /** @internal */
  _lifecycle(gen: number, cancel: boolean): void {
    if (gen === this.#gen) this.#sender._lifecycle(cancel);
  }

  /** @internal */
  _retired(gen: number, outcome: Retirement): void {
    if (gen !== this.#gen || this.#state === ENDED) return;
    if (outcome === 'Sent') {
      this.#sender._retire('Sent');
      // The terminal is on the link: once a PING behind it on its lane is answered the consumer has
      // it, and the ring need not wait out the window. Not for a terminal that may still be behind
      // a rendezvous pull (off the lane), nor for a stream kept for a re-attach (history).
      const slot = this.#slot;
      if (this.#terminalSent && !this.#history && !slot.rendezvous && this.epoch !== undefined)
        this.#host.confirmTerminal(this, slot.batcher.lane, this.epoch, this.#gen);
      return;
    }
    // The batch carrying the terminal was lost with the link: resume sends it again.
    if (this.#terminalSent) {
      if (this.#lossError === null) this.#suspend(null);
      return;
    }
    // The slot's close follows at once and tells whether this is a lost link (resumed) or an end.
    this.#discardPending = true;
  }

  /** The peer's link `epoch` is gone (a lingering stream's terminal may be lost with it). */
  linkGone(epoch: number): void {
    if (this.#state === LIVE && this.#terminalSent && (this.epoch === undefined || this.epoch === epoch))
      this.#suspend(null);
  }

  /** The consumer has the terminal of generation `gen` (see `ResumeHost.confirmTerminal`): done. */
  terminalConfirmed(gen: number): void {
    if (gen === this.#gen && this.#state === LIVE && this.#terminalSent) this.#end(null);
  }

  /** The lingering after the terminal is over: the stream is done. */
  lingerDone(): void {
    if (this.#state === LIVE && this.#terminalSent) this.#end(null);
  }

  #suspend(error: LanemuxError | null): void {
    const wasLingering = this.#terminalSent;
    this.#state = SUSPENDED;
    this.#lossError = error;
    this.#gen++;
    if (wasLingering) this.#host.linger(this, false);
    this.#terminalSent = false;
    this.#armWindow();
    this.#host.watch(this, true);
    const now = this.#host.peerNow(this.peer);
    // Already linked again (the new link came up before the old one was reported gone).
    if (now !== undefined && now.epoch !== this.epoch) queueMicrotask(() => this.peerUp(now));
  }

  /**
   * The resume window, once per suspension. A finished stream with history waits as long as it
   * lingers (a reloaded page may come for it); with nobody back by then it is simply over.
   */
  #armWindow(): void {
    if (this.#timer !== null) return;
    const finished = this.#history && this.#terminal !== 0;
    const ms = finished ? this.#host.lingerMs : this.#host.windowMs;
    this.#timer = this.#host.setTimer(() => {
      this.#timer = null;
      if (!this.suspended) return;
      if (finished) this.#end(null);
      else this.#fail('window', `the link to ${this.peer} did not come back within the resume window (${ms} ms)`);
    }, ms);
  }

  /**
   * A re-attach (docs/protocol.md §8.4): the anchor `handle` of `info`'s node, pre-bound with
   * `terms`, takes the stream from item `terms.offset + 1`; the current consumer, if still linked,
   * loses it. Null when the stream goes on there, else why not (`unknown`, `evicted`, or a reason).
   */
  retarget(info: PeerInfo, handle: AnchorHandle, terms: ResumeAnswer): string | null {
    if (this.#state === ENDED) return 'unknown';
    const r = terms.offset;
    if (r > this.sent) return `the stream has sent ${this.sent} items, fewer than the offset ${r}`;
    if (!this.#ring.holdsFrom(r + 1)) return 'evicted';
    const wasLive = this.#state === LIVE;
    const lingering = this.#terminalSent;
    this.#gen++;
    if (wasLive) {
      if (lingering) this.#host.linger(this, false);
      else if (!this.#slot.closed) this.#slot.batcher.depart(this.#slot);
    }
    this.#host.watch(this, false);
    this.#terminalSent = false;
    this.peer = info.id;
    this.instanceId = info.instanceId;
    this.handle = handle;
    this.#state = RESUMING;
    this.#armWindow();
    this.#host.watch(this, true);
    void this.#continueOn(info, terms, this.#gen);
    return null;
  }

  /** The peer linked again. */
  peerUp(info: PeerInfo): void {
    if (this.#state !== SUSPENDED) return;
    if (info.instanceId !== this.instanceId) {
      this.#fail('restarted', `peer ${this.peer} came back as another instance (it restarted): the stream is lost`);
      return;
    }
    void this.#resume(info);
  }

  async #resume(info: PeerInfo): Promise<void> {
    this.#state = RESUMING;
    const gen = this.#gen;
    // Nothing was handed back (nothing of the stream's was unconfirmed or withheld): the ring is
    // empty and numbered past the last item sent.
    if (this.#logMode) this.#leaveLog();
    let answer: Awaited<ReturnType<ResumeHost['reattach']>>;
    try {
      answer = await this.#host.reattach(this, this.#session, this.sent, this.#ring.first);
    } catch {
      // The new link went too: wait for the next one.
      if (this.#state === RESUMING && this.#gen === gen) this.#retryLater(info);
      return;
    }
    if (this.#state !== RESUMING || this.#gen !== gen) return;
    if ('refused' in answer) {
      // A stream that had sent its terminal and that the consumer no longer knows was delivered.
      if (answer.why === 'unknown' && this.#terminal !== 0 && this.#down === 0 && this.#lossError === null)
        this.#end(null);
      else if (answer.why === 'evicted') this.#fail('evicted', answer.refused);
      else this.#fail('refused', `the consumer did not resume the stream: ${answer.refused}`);
      return;
    }
    await this.#continueOn(info, answer, gen);
  }

  /** Go on at the consumer's offset on a new slot with `answer`'s terms: what it lacks again, then the rest. */
  async #continueOn(info: PeerInfo, answer: ResumeAnswer, gen: number): Promise<void> {
    if (this.#state !== RESUMING || this.#gen !== gen) return;
    const r = answer.offset;
    if (r > this.sent) {
      this.#fail('refused', `the consumer claims ${r} items of the ${this.sent} sent`);
      return;
    }
    if (!this.#ring.holdsFrom(r + 1)) {
      this.#fail(
        'evicted',
        `replay evicted: the consumer has ${r} of ${this.sent} items and the replay ring no longer holds item ${r + 1} (maxReplayBytesPerStream ${this.#host.maxReplayBytesPerStream})`,
      );
      return;
    }
    // With history the ring keeps what this consumer has: a later re-attach may start earlier.
    if (!this.#history) this.#ring.trim(r);
    const owner = new SlotOwner(this, ++this.#gen);
    let slot: EgressSlot;
    try {
      slot = await this.#host.openSlot(this, answer, owner);
    } catch {
      if (this.#gen === owner.gen && this.#state === RESUMING) {
        this.#gen++;
        this.#retryLater(info);
      }
      return;
    }
    if (this.#gen !== owner.gen || this.#state !== RESUMING) return;
    this.#slot = slot;
    slot.withholdDepth = this.#depth;
    this.#session = answer.session;
    this.epoch = info.epoch;
    // What is sent again goes to the new lane's log as well; the ring stays the stream's record
    // until all of it is handed over.
    const logged = !this.#history && !this.#ringOnly;
    if (logged) slot.replay = owner;
    // Send again what the consumer lacks, then what was sent meanwhile (the loop reads `next` afresh).
    for (let n = r + 1; n < this.#ring.next; n++) {
      let o = slot.batcher.offer(slot, this.#ring.kindAt(n), this.#ring.payloadAt(n));
      while (o === Offer.Refused) {
        try {
          await slot.waitWritable();
        } catch {
          return; // lost again: the slot's close suspended the stream
        }
        if (this.#gen !== owner.gen) return;
        o = slot.batcher.offer(slot, this.#ring.kindAt(n), this.#ring.payloadAt(n));
      }
      if (o === Offer.Closed || this.#gen !== owner.gen) return;
    }
    this.#state = LIVE;
    this.#down = 0;
    this.#lossError = null;
    if (logged && slot.replay === owner) this.#useLog(slot, owner);
    else slot.replay = null;
    if (this.#timer !== null) {
      this.#host.clearTimer(this.#timer);
      this.#timer = null;
    }
    this.#host.watch(this, false);
    this.#host.resumed();
    if (this.#terminal !== 0) slot.batcher.offer(slot, EgressKind.Terminal, this.#terminalBody);
    this.#wake(null);
    this.#wakeRoom();
  }

  /**
   * A resume over the link of `tried` failed with that link: suspended again. A newer link that came
   * up meanwhile found the stream resuming (its `peerUp` was ignored), so it is tried now.
   */
  #retryLater(tried: PeerInfo): void {
    this.#state = SUSPENDED;
    const now = this.#host.peerNow(this.peer);
    if (now !== undefined && now.epoch !== tried.epoch) queueMicrotask(() => this.peerUp(now));
  }

  #fail(reason: ResumeFailure, message: string): void {
    if (this.#state === ENDED) return;
    this.#host.failed(reason);
    const error = new ResumeFailedError('ERR_SENDER_DROPPED', reason, message, {
      ...(this.#lossError !== null ? { cause: this.#lossError } : {}),
    });
    this.#end(error);
    this.#sender._retire('Discarded');
  }

  /** The stream is over here: let its ring and timers go. */
  #end(error: LanemuxError | null): void {
    const lingering = this.#terminalSent;
    this.#state = ENDED;
    this.#error =
      error ??
      (this.#slot.closed ? this.#slot.closeError : null) ??
      new StreamError('ERR_STREAM_CLOSED', 'the stream ended');
    this.#gen++;
    if (this.#timer !== null) {
      this.#host.clearTimer(this.#timer);
      this.#timer = null;
    }
    this.#host.watch(this, false);
    if (lingering) this.#host.linger(this, false);
    if (this.token !== null) this.#host.forgetToken(this.token);
    this.#ring.clear();
    this.#wake(this.#error);
    this.#roomWaiter = null;
    if (error !== null) this.#sender._closed(error);
  }

  /** The node closes. */
  close(): void {
    if (this.suspended) this.#fail('closed', 'the node closed while the stream waited for its link');
    else this.#end(null);
  }
}

function terminalBody(kind: number, value: unknown): Uint8Array {
  if (kind === FrameKind.TransportError) return encodeFrame({ kind: 'TransportError', message: String(value) });
  return kind === FrameKind.Detached ? FRAME_DETACHED : FRAME_FINALIZED;
}
