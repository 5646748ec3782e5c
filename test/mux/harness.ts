/**
 * Shared harness of the mux unit suites.
 *
 * - Egress: a {@link Batcher} built directly over a {@link RecordingSink} (an in-memory transport
 *   that admits synchronously, stalls — the gate then holds exactly one frame — or refuses) and a
 *   {@link ManualRuntime}. Slots open with zero credit unless a test says otherwise.
 * - Ingress: an {@link IngressTable} over a {@link FakeIngressHost} that records every reply,
 *   owned-control forward and doorbell, and serves binds. Batches are encoded with the real
 *   {@link BatchEncoder} and fed through a {@link BatchReader}.
 * - Whole mux: two {@link Mux}es (or two nodes) over a {@link LoopMessenger} pair.
 *
 * Wire contents are always checked by decoding what the sink recorded (a copy of each payload).
 */
import { MUX_PRODUCER_PARTS } from '../../src/mux/producer-parts.ts';
import type { PeerEgress } from '../../src/mux/peer-egress.ts';
import { ByteBudget } from '../../src/credit/byte-budget.ts';
import type { LanemuxError } from '../../src/errors.ts';
import { MuxMetrics, WakeSource } from '../../src/metrics/mux-metrics.ts';
import type { Admission, PeerId } from '../../src/messenger/types.ts';
import { Batcher } from '../../src/mux/batcher.ts';
import type { BatchSink, BatcherHost } from '../../src/mux/batcher-host.ts';
import { Bind } from '../../src/mux/bind.ts';
import type { BindEnd, BindOwner } from '../../src/mux/bind.ts';
import { resolveMuxConfig } from '../../src/mux/config.ts';
import type { MuxConfig, ResolvedMuxConfig } from '../../src/mux/config.ts';
import { EgressKind, Offer } from '../../src/mux/egress-slot.ts';
import type { EgressSlot, EgressSlotOwner, Retirement } from '../../src/mux/egress-slot.ts';
import { IngressTable } from '../../src/mux/ingress.ts';
import type { IngressHost } from '../../src/mux/ingress.ts';
import { Mux } from '../../src/mux/mux.ts';
import { CLOSE_REASON_NAMES, RecordType } from '../../src/wire/constants.ts';
import type { CloseReason, LifecycleAction } from '../../src/wire/constants.ts';
import { BatchReader, decodeBatch } from '../../src/wire/decoder.ts';
import type { DecodedBatch, DecodedRecord } from '../../src/wire/decoder.ts';
import { BatchEncoder } from '../../src/wire/encoder.ts';
import { FRAME_FINALIZED, FrameKind, decodeFrame, encodeFrame } from '../../src/wire/frame.ts';
import { slotId } from '../../src/wire/slot-id.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import type { LoopOptions } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

/** The harness's map key of an (anchor, session) pair (the mux itself keys binds by session). */
const bindKey = (anchorId: bigint, sessionId: bigint): string => `${anchorId.toString(16)}:${sessionId.toString(16)}`;

export { EgressKind, Offer, slotId, FRAME_FINALIZED, FrameKind, RecordType, WakeSource };

export const PEER: PeerId = '00000000000000aa';

// ───────────────────────── egress: the recording sink ─────────────────────────

/** One `sendBatch` call as the transport saw it (the payload is a copy). */
export interface SentBatch {
  readonly peer: PeerId;
  readonly lane: number;
  readonly payload: Uint8Array;
  readonly decoded: DecodedBatch;
  /** Runtime time of the write. */
  readonly at: number;
}

/**
 * An in-memory transport. `open` admits synchronously (`true`); `stall` holds the next frame on a
 * pending admission (the gate holds exactly one frame, so the batcher parks); `refuse` rejects.
 */
export class RecordingSink implements BatchSink {
  mode: 'open' | 'stall' | 'refuse' = 'open';
  /** What `maxMessageSize` reports (0: no eager clamp). */
  maxMessage = 0;
  /** What `linkEpoch` reports (undefined: a transport without link epochs). */
  link: number | undefined = undefined;
  readonly sent: SentBatch[] = [];
  /** The clock that stamps each write. */
  clock: () => number = () => 0;
  #stalled: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];

  /** Singleton batches handed to rendezvous (in order). */
  readonly staged: Array<SentBatch & { id: number; muxSlot: string }> = [];
  /** Whether staging has room (false: singletons wait). */
  stageRoom = true;
  roomWaiters: Array<() => void> = [];

  /** Give staging room back and wake its waiters. */
  freeStageRoom(): void {
    this.stageRoom = true;
    const w = this.roomWaiters;
    this.roomWaiters = [];
    for (const cb of w) cb();
  }

  /** Admission under the current mode (shared by batches and staged descriptors). */
  admit(): Admission {
    if (this.mode === 'refuse') return Promise.reject(new Error('admission refused'));
    if (this.mode === 'stall') return new Promise<void>((resolve, reject) => this.#stalled.push({ resolve, reject }));
    return true;
  }

  sendBatch(peer: PeerId, lane: number, payload: Uint8Array): Admission {
    const copy = payload.slice();
    this.sent.push({ peer, lane, payload: copy, decoded: decodeBatch(copy), at: this.clock() });
    if (this.mode === 'refuse') return Promise.reject(new Error('admission refused'));
    if (this.mode === 'stall') return new Promise<void>((resolve, reject) => this.#stalled.push({ resolve, reject }));
    return true;
  }

  maxMessageSize(_peer: PeerId): number {
    return this.maxMessage;
  }

  linkEpoch(_peer: PeerId): number | undefined {
    return this.link;
  }

  /** Frames parked on admission. */
  get stalledCount(): number {
    return this.#stalled.length;
  }

  /** Admit every parked frame and go back to synchronous admission. */
  release(): void {
    this.mode = 'open';
    const s = this.#stalled;
    this.#stalled = [];
    for (const x of s) x.resolve();
  }

  /** Admit the parked frames but keep stalling the next ones. */
  admitStalled(): void {
    const s = this.#stalled;
    this.#stalled = [];
    for (const x of s) x.resolve();
  }

  /** Refuse every parked frame (epoch death). */
  refuseStalled(): void {
    const s = this.#stalled;
    this.#stalled = [];
    for (const x of s) x.reject(new Error('admission refused'));
  }
}

/** Records every callback a batcher makes to a slot's owner. */
export class RecordingOwner implements EgressSlotOwner {
  readonly closed: Array<LanemuxError | null> = [];
  readonly lifecycle: boolean[] = [];
  readonly retired: Retirement[] = [];
  onSlotClosed(error: LanemuxError | null): void {
    this.closed.push(error);
  }
  onLifecycle(cancel: boolean): void {
    this.lifecycle.push(cancel);
  }
  onRetired(outcome: Retirement): void {
    this.retired.push(outcome);
  }
}

/** A batcher under test with everything it talks to. */
export interface EgressHarness {
  readonly runtime: ManualRuntime;
  readonly metrics: MuxMetrics;
  readonly sink: RecordingSink;
  readonly config: ResolvedMuxConfig;
  readonly host: BatcherHost;
  readonly batcher: Batcher;
  /** Epochs handed out so far. */
  epochs: bigint[];
  /** What `host.peerAlive` answers (default true). */
  peerAlive: boolean;
}

/** Build a batcher for (PEER, lane) with its own runtime, metrics and sink. */
export function egress(
  config: MuxConfig = {},
  options: { maxMessageSize?: number; lane?: number; peerEgress?: PeerEgress; sendWindow?: () => number } = {},
): EgressHarness {
  const runtime = new ManualRuntime();
  const metrics = new MuxMetrics();
  const sink = new RecordingSink();
  sink.maxMessage = options.maxMessageSize ?? 0;
  sink.clock = () => runtime.now();
  const resolved = resolveMuxConfig(config);
  const epochs: bigint[] = [];
  let epoch = 0n;
  const state = { peerAlive: true };
  const reposted: number[] = [];
  const host: BatcherHost = {
    config: resolved,
    metrics,
    runtime,
    sink,
    nextEpoch: () => {
      epoch += 1n;
      epochs.push(epoch);
      return epoch;
    },
    peerAlive: () => state.peerAlive,
    repostCredit: (_peer, _lane, credit) => {
      reposted.push(...credit);
    },
    // Rendezvous: the sink records each staged singleton and admits its descriptor like a batch.
    stage: (peer, lane, payload, muxSlot) => {
      const id = sink.staged.length + 1;
      const copy = payload.slice();
      sink.staged.push({ id, peer, lane, payload: copy, decoded: decodeBatch(copy), muxSlot, at: sink.clock() });
      return { id, admission: sink.admit() };
    },
    stageRoom: () => sink.stageRoom,
    ...(options.peerEgress !== undefined ? { peerEgress: () => options.peerEgress! } : {}),
    ...(options.sendWindow !== undefined ? { sendWindow: options.sendWindow } : {}),
    whenStageRoom: (_peer, cb) => {
      sink.roomWaiters.push(cb);
    },
  };
  const batcher = new Batcher(host, PEER, options.lane ?? 0);
  const h: EgressHarness = {
    runtime,
    metrics,
    sink,
    config: resolved,
    host,
    batcher,
    epochs,
    get peerAlive() {
      return state.peerAlive;
    },
    set peerAlive(v: boolean) {
      state.peerAlive = v;
    },
  };
  return h;
}

let anchorSeq = 0x1000n;

/** An open slot with its owner. */
export interface OpenedSlot {
  readonly slot: EgressSlot;
  readonly owner: RecordingOwner;
}

/**
 * Open a slot holding `credit` (0 unless a line says otherwise) and wait for the awaited open
 * ack. With a synchronously admitting sink this resolves after a microtask.
 */
export async function openSlot(
  h: EgressHarness,
  credit = 0,
  anchorId?: bigint,
  sessionId?: bigint,
): Promise<OpenedSlot> {
  const owner = new RecordingOwner();
  anchorSeq += 1n;
  const slot = await h.batcher.openSlot(anchorId ?? anchorSeq, sessionId ?? anchorSeq + 0x100000n, credit, owner);
  return { slot, owner };
}

/** Open `n` slots (each OpenSlot goes in its own batch). */
export async function openSlots(h: EgressHarness, n: number, credit = 0): Promise<OpenedSlot[]> {
  const out: OpenedSlot[] = [];
  for (let i = 0; i < n; i++) out.push(await openSlot(h, credit));
  return out;
}

/** Offer `Item(str)` records. Returns the answers. */
export function offerItems(h: EgressHarness, slot: EgressSlot, items: readonly string[]): Offer[] {
  return items.map((s) => h.batcher.offer(slot, EgressKind.ItemString, s));
}

/** Offer the `Finalized` terminal. */
export function offerFinalized(h: EgressHarness, slot: EgressSlot): Offer {
  return h.batcher.offer(slot, EgressKind.Terminal, FRAME_FINALIZED);
}

/** Grant `n` credits to an owned slot through the inbox (a CreditUpdate from the peer). */
export function grant(h: EgressHarness, slot: EgressSlot, n: number): boolean {
  return h.batcher.inbox.postCredit(slot.id, n);
}

/**
 * A producer that respects back-pressure: offers each item and, on `Offer.Wait`, waits for
 * `waitWritable()` before the next one. Resolves when every item was taken (or rejects).
 */
export async function produce(
  h: EgressHarness,
  slot: EgressSlot,
  items: readonly string[],
  terminal = false,
): Promise<void> {
  for (const it of items) {
    const r = h.batcher.offer(slot, EgressKind.ItemString, it);
    if (r === Offer.Closed) throw new Error(`offer of ${it} answered Closed`);
    if (r === Offer.Wait) await slot.waitWritable();
  }
  if (terminal) {
    const r = offerFinalized(h, slot);
    if (r === Offer.Closed) throw new Error('terminal answered Closed');
  }
}

/** Numbered tokens `${prefix}0 … ${prefix}${n-1}`. */
export function tokens(n: number, prefix = 't', from = 0): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${from + i}`);
}

// ───────────────────────── reading the wire ─────────────────────────

/** A compact label of a record: `"tok"@3`, `Finalized@4`, `Open@0`, `Close(TerminalSent)@5`, `Credit+7`, `Cancel`. */
export function label(r: DecodedRecord, withSlot = false): string {
  const prefix = withSlot ? `${r.slot >>> 8}.${r.slot & 0xff}:` : '';
  switch (r.type) {
    case RecordType.Data:
      return `${prefix}${frameLabel(r.body)}@${r.frameSeq}`;
    case RecordType.OpenSlot:
      return `${prefix}Open@${r.frameSeq}`;
    case RecordType.CloseSlot:
      return `${prefix}Close(${CLOSE_REASON_NAMES[r.closeReason ?? 0]})@${r.frameSeq}`;
    case RecordType.CreditUpdate:
      return `${prefix}Credit+${r.creditDelta}`;
    case RecordType.SlotHeartbeat:
      return `${prefix}HB@${r.frameSeq}`;
    default:
      return `${prefix}${r.lifecycleAction === 1 ? 'Cancel' : 'Stop'}`;
  }
}

/** A Data body as a short label: a string item as JSON, bytes as `bytes<n>`, unit frames by name. */
export function frameLabel(body: Uint8Array): string {
  try {
    const f = decodeFrame(body);
    if (f.kind === 'Item')
      return typeof f.value === 'string'
        ? JSON.stringify(f.value)
        : f.value instanceof Uint8Array
          ? `bytes${f.value.byteLength}`
          : JSON.stringify(f.value);
    if (f.kind === 'SenderError' || f.kind === 'TransportError') return `${f.kind}(${f.message})`;
    return f.kind;
  } catch {
    return `raw${body.byteLength}`;
  }
}

/** Every batch the sink recorded from index `from` on. */
export function batches(h: { sink: RecordingSink }, from = 0): DecodedBatch[] {
  return h.sink.sent.slice(from).map((b) => b.decoded);
}

/** Batches as label lists, skipping OpenSlot-only batches (the opens are checked where they matter). */
export function wire(h: { sink: RecordingSink }, from = 0, withSlot = false): string[][] {
  return batches(h, from)
    .filter((b) => !(b.records.length > 0 && b.records.every((r) => r.type === RecordType.OpenSlot)))
    .map((b) => b.records.map((r) => label(r, withSlot)));
}

/** All records the sink recorded from batch `from` on, flattened. */
export function records(h: { sink: RecordingSink }, from = 0): DecodedRecord[] {
  return batches(h, from).flatMap((b) => b.records);
}

/** Data records of one slot, flattened, in wire order. */
export function dataOf(h: { sink: RecordingSink }, slot: number, from = 0): DecodedRecord[] {
  return records(h, from).filter((r) => r.slot === slot && r.type === RecordType.Data);
}

/** The items (string values) a slot's Data records carry, in wire order. */
export function itemsOf(h: { sink: RecordingSink }, slot: number, from = 0): string[] {
  return dataOf(h, slot, from).map((r) => frameLabel(r.body));
}

// ───────────────────────── ingress ─────────────────────────

/** A reply ingress posted toward the peer's batcher. */
export interface Reply {
  readonly kind: 'credit' | 'close' | 'reject';
  readonly slot: number;
  readonly value: number;
}

/** Control ingress forwarded to this node's own batcher (owned slots). */
export interface OwnedForward {
  readonly kind: 'credit' | 'close' | 'lifecycle';
  readonly slot: number;
  readonly value: number;
  readonly session?: bigint;
}

/** Records what ingress asks of its mux. Binds are served from a map, like the Mux does. */
export class FakeIngressHost implements IngressHost {
  readonly metrics = new MuxMetrics();
  readonly binds = new Map<string, Bind>();
  readonly replies: Reply[] = [];
  readonly owned: OwnedForward[] = [];
  readonly claimed: Bind[] = [];
  readonly ended: Array<{ bind: Bind; end: BindEnd }> = [];
  doorbells = 0;
  /** Clock and switch of credit auto-tuning (unset: static credit). */
  runtime?: { now(): number };
  config?: { autoCredit: boolean };

  findBind(anchorId: bigint, sessionId: bigint, peer: PeerId): Bind | undefined {
    const b = this.binds.get(bindKey(anchorId, sessionId));
    return b !== undefined && !b.claimed && !b.ended && (b.peer === null || b.peer === peer) ? b : undefined;
  }
  bindClaimed(bind: Bind): void {
    this.claimed.push(bind);
  }
  bindEnded(bind: Bind, end: BindEnd): void {
    if (bind.ended) return;
    bind.ended = true;
    this.binds.delete(bindKey(bind.anchorId, bind.sessionId));
    this.ended.push({ bind, end });
    bind.owner.onEnded(bind, end);
  }
  replyCredit(_peer: PeerId, _lane: number, peerSlot: number, delta: number): void {
    this.replies.push({ kind: 'credit', slot: peerSlot, value: delta });
  }
  replyClose(_peer: PeerId, _lane: number, peerSlot: number, reason: number): void {
    this.replies.push({ kind: 'close', slot: peerSlot, value: reason });
  }
  replyReject(_peer: PeerId, _lane: number, peerSlot: number, reason: number): void {
    this.replies.push({ kind: 'reject', slot: peerSlot, value: reason });
  }
  ownedCredit(_peer: PeerId, _lane: number, slot: number, delta: number): void {
    this.owned.push({ kind: 'credit', slot, value: delta });
  }
  ownedClose(_peer: PeerId, _lane: number, slot: number, reason: number): void {
    this.owned.push({ kind: 'close', slot, value: reason });
  }
  ownedLifecycle(_peer: PeerId, _lane: number, slot: number, session: bigint, cancel: boolean): void {
    this.owned.push({ kind: 'lifecycle', slot, value: cancel ? 1 : 0, session });
  }
  ringDoorbell(_table: IngressTable): void {
    this.doorbells++;
  }

  /** Credit replies per slot, summed. */
  grants(): Map<number, number> {
    const m = new Map<number, number>();
    for (const r of this.replies) if (r.kind === 'credit') m.set(r.slot, (m.get(r.slot) ?? 0) + r.value);
    return m;
  }
}

/** A bind owner that records what it is told. */
export class RecordingBindOwner implements BindOwner {
  claims = 0;
  readonly ends: BindEnd[] = [];
  onClaimed(_bind: Bind): void {
    this.claims++;
  }
  onEnded(_bind: Bind, end: BindEnd): void {
    this.ends.push(end);
  }
}

/** A record to put in a batch that ingress reads. */
export type Rec =
  | {
      readonly t: 'open';
      readonly slot: number;
      readonly seq: number;
      readonly anchor: bigint;
      readonly session: bigint;
    }
  | { readonly t: 'data'; readonly slot: number; readonly seq: number; readonly body: Uint8Array }
  | { readonly t: 'close'; readonly slot: number; readonly seq: number; readonly reason: CloseReason }
  | { readonly t: 'credit'; readonly slot: number; readonly delta: number }
  | { readonly t: 'hb'; readonly slot: number; readonly seq: number }
  | { readonly t: 'life'; readonly slot: number; readonly session: bigint; readonly action: LifecycleAction };

export const rec = {
  open: (slot: number, anchor: bigint, session: bigint, seq = 0): Rec => ({ t: 'open', slot, seq, anchor, session }),
  item: (slot: number, seq: number, value: string): Rec => ({
    t: 'data',
    slot,
    seq,
    body: encodeFrame({ kind: 'Item', value }),
  }),
  data: (slot: number, seq: number, body: Uint8Array): Rec => ({ t: 'data', slot, seq, body }),
  fin: (slot: number, seq: number): Rec => ({ t: 'data', slot, seq, body: FRAME_FINALIZED }),
  close: (slot: number, seq: number, reason: CloseReason): Rec => ({ t: 'close', slot, seq, reason }),
  credit: (slot: number, delta: number): Rec => ({ t: 'credit', slot, delta }),
  hb: (slot: number, seq: number): Rec => ({ t: 'hb', slot, seq }),
  life: (slot: number, session: bigint, action: LifecycleAction): Rec => ({ t: 'life', slot, session, action }),
};

/** Encode a batch with the real encoder (cap large enough for any test batch). */
export function encodeBatch(epoch: bigint, batchSeq: number, recs: readonly Rec[], lane = 0): Uint8Array {
  const enc = new BatchEncoder({ maxBytes: 1 << 26, initialBytes: 4096 });
  enc.begin(epoch, batchSeq, lane);
  for (const r of recs) {
    switch (r.t) {
      case 'open':
        enc.appendOpenSlot(r.slot, r.seq, r.anchor, r.session);
        break;
      case 'data':
        enc.appendData(r.slot, r.seq, r.body);
        break;
      case 'close':
        enc.appendCloseSlot(r.slot, r.seq, r.reason);
        break;
      case 'credit':
        enc.appendCreditUpdate(r.slot, 0, r.delta);
        break;
      case 'hb':
        enc.appendSlotHeartbeat(r.slot, r.seq);
        break;
      case 'life':
        enc.appendLifecycleSlot(r.slot, 0, r.session, r.action);
        break;
    }
  }
  return enc.finish().slice();
}

/** Section C parameters: C = 4, slot budget 256 B, peer budget 4,096 B. */
export const SECTION_C = { C: 4, slotBudget: 256, peerBudget: 4096 } as const;

/** An ingress table under test with its host and a sender-side batch counter. */
export class IngressHarness {
  readonly host = new FakeIngressHost();
  readonly table: IngressTable;
  readonly peerBudget: ByteBudget;
  readonly reader = new BatchReader();
  readonly C: number;
  readonly slotBudget: number;
  epoch = 1n;
  batchSeq = 0;
  #anchor = 0x5000n;

  constructor(
    options: { C?: number; slotBudget?: number; peerBudget?: number; lane?: number; autoCredit?: () => number } = {},
  ) {
    if (options.autoCredit !== undefined) {
      this.host.runtime = { now: options.autoCredit };
      this.host.config = { autoCredit: true };
    }
    this.C = options.C ?? SECTION_C.C;
    this.slotBudget = options.slotBudget ?? SECTION_C.slotBudget;
    this.peerBudget = new ByteBudget(options.peerBudget ?? SECTION_C.peerBudget);
    this.table = new IngressTable(this.host, PEER, options.lane ?? 0, this.peerBudget);
  }

  get metrics(): MuxMetrics {
    return this.host.metrics;
  }

  /** Register a bind (an attach answered or a pre-bind). */
  bind(options: { C?: number; slotBudget?: number; anchor?: bigint; session?: bigint } = {}): Bind {
    this.#anchor += 1n;
    const anchor = options.anchor ?? this.#anchor;
    const session = options.session ?? this.#anchor + 0x9000n;
    const b = new Bind(
      anchor,
      session,
      options.C ?? this.C,
      options.slotBudget ?? this.slotBudget,
      0,
      PEER,
      new RecordingBindOwner(),
      1e12,
    );
    this.host.binds.set(bindKey(b.anchorId, b.sessionId), b);
    return b;
  }

  /** Deliver one batch at the current epoch and the next batch_seq. */
  send(...recs: Rec[]): void {
    this.deliver(encodeBatch(this.epoch, this.batchSeq, recs));
    this.batchSeq = (this.batchSeq + 1) >>> 0;
  }

  /** Deliver an already-encoded payload. */
  deliver(payload: Uint8Array): void {
    if (!this.reader.reset(payload)) throw new Error(`bad test batch: ${this.reader.error?.kind}`);
    this.table.handleBatch(this.reader);
  }

  /** Open a slot for `bind` at SlotId `id` (OpenSlot seq 0) in a batch of its own. */
  open(id: number, bind: Bind): void {
    this.send(rec.open(id, bind.anchorId, bind.sessionId));
  }

  /** A doorbell visit (what the Mux's doorbell does). */
  doorbell(): void {
    this.table.doorbellPending = false;
    this.table.visitDirty();
  }
}

/** Take every frame the consumer can read now, as labels (fires the drain signal). */
export function read(bind: Bind, max = Number.POSITIVE_INFINITY): string[] {
  const out: string[] = [];
  const b = bind.buffer;
  while (out.length < max && b.take()) {
    const v = b.value;
    switch (b.kind) {
      case FrameKind.Item:
        out.push(typeof v === 'string' ? v : `item:${String(v)}`);
        break;
      case FrameKind.Heartbeat:
        out.push('Heartbeat');
        break;
      case FrameKind.Finalized:
        out.push('Finalized');
        break;
      case FrameKind.Dropped:
        out.push('Dropped');
        break;
      case FrameKind.Detached:
        out.push('Detached');
        break;
      case FrameKind.SenderError:
        out.push(`SenderError(${String(v)})`);
        break;
      case FrameKind.TransportError:
        out.push(`TransportError(${String(v)})`);
        break;
      default:
        out.push(`Undecodable(${String(v)})`);
    }
  }
  return out;
}

// ───────────────────────── whole mux over a loop messenger ─────────────────────────

/** Two muxes joined by a LoopMessenger pair, sharing one manual clock. */
export interface MuxPair {
  readonly runtime: ManualRuntime;
  readonly a: Mux;
  readonly b: Mux;
  readonly ma: LoopMessenger;
  readonly mb: LoopMessenger;
  readonly metricsA: MuxMetrics;
  readonly metricsB: MuxMetrics;
}

export function muxPair(config: MuxConfig = {}, loop: { a?: LoopOptions; b?: LoopOptions } = {}): MuxPair {
  const runtime = new ManualRuntime();
  const [ma, mb] = LoopMessenger.pair(loop.a ?? {}, loop.b ?? {});
  const resolved = resolveMuxConfig(config);
  const metricsA = new MuxMetrics();
  const metricsB = new MuxMetrics();
  const a = new Mux({ config: resolved, metrics: metricsA, runtime, messenger: ma, producer: MUX_PRODUCER_PARTS });
  const b = new Mux({ config: resolved, metrics: metricsB, runtime, messenger: mb, producer: MUX_PRODUCER_PARTS });
  return { runtime, a, b, ma, mb, metricsA, metricsB };
}

/** Batches a LoopMessenger put on the wire, decoded. */
export function loopWire(m: LoopMessenger, from = 0): DecodedBatch[] {
  return m.sent.slice(from).map((s) => decodeBatch(s.payload));
}

/** The wakes counter as a plain object, for before/after comparisons. */
export function wakes(m: MuxMetrics): Record<keyof typeof WakeSource, number> {
  return {
    open: m.batcherWakes[WakeSource.open]!,
    control: m.batcherWakes[WakeSource.control]!,
    frame: m.batcherWakes[WakeSource.frame]!,
    inlet_closed: m.batcherWakes[WakeSource.inlet_closed]!,
    linger: m.batcherWakes[WakeSource.linger]!,
  };
}

/** Difference of two wake snapshots. */
export function wakeDelta(
  before: Record<keyof typeof WakeSource, number>,
  after: Record<keyof typeof WakeSource, number>,
): Record<keyof typeof WakeSource, number> {
  return {
    open: after.open - before.open,
    control: after.control - before.control,
    frame: after.frame - before.frame,
    inlet_closed: after.inlet_closed - before.inlet_closed,
    linger: after.linger - before.linger,
  };
}

/** `Item(bytes)` body of exactly `bodyLength` bytes (bodyLength ≥ 8 and < 262). */
export function itemBody(bodyLength: number): Uint8Array {
  // Item(bytes): 6-byte prefix + bin8 header (2) + n bytes.
  const n = bodyLength - 8;
  if (n < 0 || n > 0xff) throw new Error(`itemBody(${bodyLength}) out of range`);
  const body = encodeFrame({ kind: 'Item', value: new Uint8Array(n).fill(0x5a) });
  if (body.byteLength !== bodyLength) throw new Error(`itemBody: got ${body.byteLength}`);
  return body;
}

/** SlotId helper for owned slots: (index, generation). */
export function sid(index: number, generation = 0): number {
  return slotId(index, generation);
}
