/**
 * Rendezvous transfers: a record larger than the batch cap goes alone, in a singleton batch that
 * the receiver pulls in chunks instead of the sender pushing it down the ordered lane
 * (docs/protocol.md §8.1).
 *
 * Sender: the singleton's bytes are kept here, and a small descriptor (`_rv_stage`) goes on the
 * slot's lane. The descriptor's admission is the singleton's resolution: it lifts the slot's fence,
 * so later records go eagerly and wait in the receiver's hold until the singleton lands.
 * Receiver: the descriptor is checked against `stagedPayloadMax` before anything is allocated;
 * then the payload is pulled with unary `_rv_pull` requests (chunked, a few in flight) off the
 * lane — other streams on the lane keep flowing — and the assembled batch goes to ingress as if it
 * had arrived on its lane. The descriptor names its stream as `<epoch>:<slot>:<session>` (the
 * reference's `_mux_slot` header), so a refusal or a failed pull ends just that stream.
 *
 * Memory: each side bounds what it holds per peer (`max(peerByteBudget, stagedPayloadMax)` staged
 * out; one transfer pulled at a time per peer, at most `stagedPayloadMax`), and staged bytes are
 * dropped when pulled, refused, expired (the accept window) or when the peer goes. That budget is
 * rendezvous's own; separately, the peer window (peer-window.ts) counts each singleton by its whole
 * batch once staged, so delivered singletons sitting unread in slot buffers stay within the window
 * like any record. A transfer the receiver will never apply is released to the window here
 * (`unkept`).
 */
import * as z from '../schema.ts';
import { LanemuxError } from '../errors.ts';
import type { Admission, PeerId } from '../messenger/types.ts';
import { decodeBounded, encodeOwned } from '../wire/msgpack.ts';
import { int, parse, str } from '../validate.ts';

/** Fire-and-forget descriptor of a staged singleton, sent on the slot's lane. */
export const STAGE_HANDLER = '_rv_stage';
/** Unary pull of one chunk (or release) of a staged singleton. */
export const PULL_HANDLER = '_rv_pull';
/** Largest chunk a pull asks for (the transport's frame limit may lower it). */
export const PULL_CHUNK_MAX = 512 * 1024;
/** Room left in a pull response for the messenger envelope. */
const PULL_ENVELOPE_ROOM = 1024;
/**
 * The largest chunk of one pull (docs/protocol.md §8.1): `min(512 KiB, max message size − 1 KiB)`, at
 * least 1 KiB. `maxPayload` is what the messenger reports, the link's max message size less the
 * 1-byte batch envelope, so the envelope byte is added back (both sides must compute the same limit).
 */
export function pullChunkLimit(maxPayload: number): number {
  return Math.min(PULL_CHUNK_MAX, Math.max(1024, maxPayload + 1 - PULL_ENVELOPE_ROOM));
}
/** Pulls in flight per transfer. */
const PULL_WINDOW = 4;
/** Descriptors a receiver queues per peer before it refuses more (each names a fenced slot). */
export const MAX_QUEUED_TRANSFERS = 4096;
/** Release requests in flight per peer (more refusals rely on the sender's accept window). */
const MAX_RELEASES_IN_FLIGHT = 16;

/** `<epoch>:<slot>:<session>`, decimal: the stream a staged singleton belongs to. */
export function formatMuxSlot(epoch: bigint, slot: number, session: bigint): string {
  return `${epoch}:${slot}:${session}`;
}

/** Parse a `<epoch>:<slot>:<session>` string (undefined if malformed). */
export function parseMuxSlot(text: string): { epoch: bigint; slot: number; session: bigint } | undefined {
  const m = /^(\d{1,20}):(\d{1,10}):(\d{1,20})$/.exec(text);
  if (m === null) return undefined;
  const epoch = BigInt(m[1]!);
  const slot = Number(m[2]!);
  const session = BigInt(m[3]!);
  if (epoch >= 1n << 64n || slot > 0xffff_ffff || session >= 1n << 64n) return undefined;
  return { epoch, slot, session };
}

// Unknown fields are ignored, as in every control message (docs/protocol.md §8): a later version may add one.
const descriptorSchema = z.object({
  id: int(1, Number.MAX_SAFE_INTEGER),
  size: int(1, Number.MAX_SAFE_INTEGER),
  mux_slot: str(64),
});

// A release is tried first: a pull that also says `release: true` is a release.
const pullSchema = z.union([
  z.object({ id: int(1), release: z.literal(true) }),
  z.object({ id: int(1), offset: int(0), length: int(1) }),
]);

/** A `_rv_stage` descriptor's fields, or undefined when a known field breaks its rule. */
export function parseDescriptor(body: unknown): z.output<typeof descriptorSchema> | undefined {
  const d = parse(descriptorSchema, body);
  return d.success ? d.data : undefined;
}

/** A `_rv_pull` request (a range or a release), or undefined when a known field breaks its rule. */
export function parsePull(body: unknown): z.output<typeof pullSchema> | undefined {
  const r = parse(pullSchema, body);
  return r.success ? r.data : undefined;
}

// ───────────────────────── sender side ─────────────────────────

/** What the sender side needs from the mux. */
export interface StageOutHost {
  readonly now: () => number;
  send(peer: PeerId, lane: number, name: string, payload: Uint8Array): Admission;
  maxMessageSize(peer: PeerId): number;
  /** Staged bytes changed by `delta` (for a gauge). */
  bytesChanged?(delta: number): void;
}

interface Outgoing {
  readonly id: number;
  readonly peer: PeerId;
  readonly payload: Uint8Array;
  /** Staging time + window; pushed back by each pull of this transfer. */
  expires: number;
  started: boolean;
}

/** The sender's staged singletons. */
export class StageOut {
  readonly #host: StageOutHost;
  readonly #budget: number;
  readonly #ttl: number;
  #byId = new Map<number, Outgoing>();
  #bytes = new Map<PeerId, number>();
  #room = new Map<PeerId, Array<() => void>>();
  /** Last pull from each peer: a peer that is pulling keeps all its transfers (it pulls them in order). */
  #lastPull = new Map<PeerId, number>();
  #nextId = 1;

  /** `budget`: staged bytes per peer; `ttl`: how long a transfer may wait for its pulls (ms). */
  constructor(host: StageOutHost, budget: number, ttl: number) {
    this.#host = host;
    this.#budget = budget;
    this.#ttl = ttl;
  }

  /** Staged bytes held for transfers (all peers). */
  get heldBytes(): number {
    let n = 0;
    for (const v of this.#bytes.values()) n += v;
    return n;
  }

  /** Transfers waiting to be pulled. */
  get pending(): number {
    return this.#byId.size;
  }

  /** True if `size` more bytes may be staged toward `peer` now (a lone transfer always fits). */
  hasRoom(peer: PeerId, size: number): boolean {
    const held = this.#bytes.get(peer) ?? 0;
    return held === 0 || held + size <= this.#budget;
  }

  /** Call `cb` once, when staged bytes toward `peer` are next released. */
  whenRoom(peer: PeerId, cb: () => void): void {
    let list = this.#room.get(peer);
    if (list === undefined) {
      list = [];
      this.#room.set(peer, list);
    }
    list.push(cb);
  }

  /**
   * Stage `payload` (a whole singleton batch) for `peer` and send its descriptor on `lane`.
   * Returns the transfer id and the descriptor's admission (the singleton's resolution).
   */
  stage(peer: PeerId, lane: number, payload: Uint8Array, muxSlot: string): { id: number; admission: Admission } {
    const id = this.#nextId++;
    this.#byId.set(id, { id, peer, payload, expires: this.#host.now() + this.#ttl, started: false });
    this.#bytes.set(peer, (this.#bytes.get(peer) ?? 0) + payload.byteLength);
    this.#host.bytesChanged?.(payload.byteLength);
    let admission: Admission;
    try {
      admission = this.#host.send(
        peer,
        lane,
        STAGE_HANDLER,
        encodeOwned({ id, size: payload.byteLength, mux_slot: muxSlot }),
      );
    } catch (e) {
      admission = Promise.reject(e);
    }
    if (admission !== true) {
      admission = admission.then(undefined, (e: unknown) => {
        this.release(id);
        throw e;
      });
    }
    return { id, admission };
  }

  /** The `_rv_pull` handler: serve a chunk to the peer the transfer was staged for. */
  onPull(from: PeerId, body: unknown): Uint8Array | null {
    const req = parse(pullSchema, body);
    if (!req.success)
      throw new LanemuxError(
        'ERR_PROTOCOL',
        `malformed ${PULL_HANDLER} request: ${req.error.issues[0]?.message ?? 'invalid'}`,
      );
    const t = this.#byId.get(req.data.id);
    if (t !== undefined && t.peer === from) {
      const now = this.#host.now();
      this.#lastPull.set(from, now);
      t.started = true;
      t.expires = now + this.#ttl;
    }
    // Looked up among this peer's transfers only: a peer can pull or release only what was staged for it.
    if (t === undefined || t.peer !== from)
      throw new LanemuxError(
        'ERR_UNKNOWN_TRANSFER',
        `no staged transfer ${req.data.id} for this peer (pulled, released or expired)`,
      );
    if ('release' in req.data) {
      this.release(t.id);
      return null;
    }
    const { offset, length } = req.data;
    const limit = pullChunkLimit(this.#host.maxMessageSize(from));
    if (length > limit || offset + length > t.payload.byteLength) {
      throw new LanemuxError(
        'ERR_PROTOCOL',
        `pull of ${length} bytes at ${offset} is outside transfer ${t.id} (${t.payload.byteLength} bytes, chunk limit ${limit})`,
      );
    }
    const chunk = t.payload.subarray(offset, offset + length);
    // The receiver pulls each range once; the last range frees the transfer.
    if (offset + length === t.payload.byteLength) this.release(t.id);
    return chunk;
  }

  /** Drop a transfer and wake senders waiting for room toward its peer. */
  release(id: number): void {
    const t = this.#byId.get(id);
    if (t === undefined) return;
    this.#byId.delete(id);
    this.#host.bytesChanged?.(-t.payload.byteLength);
    const left = (this.#bytes.get(t.peer) ?? 0) - t.payload.byteLength;
    if (left > 0) this.#bytes.set(t.peer, left);
    else this.#bytes.delete(t.peer);
    const waiters = this.#room.get(t.peer);
    if (waiters !== undefined) {
      this.#room.delete(t.peer);
      for (const cb of waiters) cb();
    }
  }

  /** Drop transfers whose pulls never came (sweep tick). */
  expire(now: number): void {
    if (this.#byId.size === 0) return;
    for (const t of [...this.#byId.values()]) {
      // A transfer being pulled expires a window after its last pull; one not started yet waits
      // while its peer is pulling others (the receiver pulls one transfer at a time).
      if (t.expires > now) continue;
      if (t.started || (this.#lastPull.get(t.peer) ?? Number.NEGATIVE_INFINITY) + this.#ttl <= now) this.release(t.id);
    }
  }

  /** The peer is gone: its transfers will never be pulled. */
  peerGone(peer: PeerId): void {
    for (const t of [...this.#byId.values()]) if (t.peer === peer) this.release(t.id);
    this.#room.delete(peer);
    this.#lastPull.delete(peer);
  }
  /** The node is closing: every staged transfer is dropped. */
  close(): void {
    for (const t of [...this.#byId.values()]) this.release(t.id);
    this.#room.clear();
    this.#lastPull.clear();
  }
}

// ───────────────────────── receiver side ─────────────────────────

/** What the receiver side needs from the mux. */
export interface StageInHost {
  request(peer: PeerId, name: string, body: unknown): Promise<unknown>;
  maxMessageSize(peer: PeerId): number;
  /** The assembled singleton batch, as if it had arrived on `lane`. */
  deliver(peer: PeerId, lane: number, payload: Uint8Array): void;
  /** End just the named stream: TransportError to its consumer, LifecycleSlot cancel to its producer. */
  refuse(peer: PeerId, lane: number, epoch: bigint, slot: number, session: bigint, message: string): void;
  /** Bytes being assembled changed by `delta` (for a gauge). */
  bytesChanged?(delta: number): void;
  /** A transfer of `size` bytes will never be delivered (refused or failed): the sender's window counted it. */
  unkept?(peer: PeerId, size: number): void;
  /** A transfer for the named stream was queued (`+1`) or settled: delivered, refused or failed (`-1`). */
  pendingChanged?(peer: PeerId, lane: number, epoch: bigint, slot: number, session: bigint, delta: number): void;
}

interface Incoming {
  readonly id: number;
  readonly size: number;
  readonly lane: number;
  readonly epoch: bigint;
  readonly slot: number;
  readonly session: bigint;
  readonly muxSlot: string;
}

/** The receiver's side: descriptors in, pulls out, batches to ingress. */
export class StageIn {
  readonly #host: StageInHost;
  readonly #max: number;
  #queues = new Map<PeerId, Incoming[]>();
  #releasing = new Map<PeerId, number>();
  #closed = false;
  /** Bytes of transfers being assembled (all peers). */
  assembling = 0;

  constructor(host: StageInHost, stagedPayloadMax: number) {
    this.#host = host;
    this.#max = stagedPayloadMax;
  }

  /** The `_rv_stage` handler (ordered on its lane; never awaits). */
  onDescriptor(from: PeerId, lane: number, payload: Uint8Array): void {
    if (this.#closed) return;
    let body: unknown;
    try {
      body = decodeBounded(payload);
    } catch {
      return; // not a descriptor: nothing names a stream to end
    }
    const d = parse(descriptorSchema, body);
    if (!d.success) return;
    const named = parseMuxSlot(d.data.mux_slot);
    if (named === undefined) return;
    const t: Incoming = {
      id: d.data.id,
      size: d.data.size,
      lane,
      epoch: named.epoch,
      slot: named.slot,
      session: named.session,
      muxSlot: d.data.mux_slot,
    };
    if (t.size > this.#max) {
      // Refused before anything is allocated: end that stream only, and free the sender's copy.
      this.#refuse(
        from,
        t,
        `staged transfer for stream ${t.muxSlot} states ${t.size} bytes, over this receiver's stagedPayloadMax of ${this.#max} bytes`,
      );
      return;
    }
    let q = this.#queues.get(from);
    if (q === undefined) {
      q = [];
      this.#queues.set(from, q);
    }
    if (q.length >= MAX_QUEUED_TRANSFERS) {
      this.#refuse(from, t, `too many staged transfers queued from this peer (${MAX_QUEUED_TRANSFERS})`);
      return;
    }
    q.push(t);
    this.#host.pendingChanged?.(from, t.lane, t.epoch, t.slot, t.session, 1);
    if (q.length === 1) void this.#pump(from);
  }

  #refuse(from: PeerId, t: Incoming, message: string): void {
    this.#host.unkept?.(from, t.size);
    this.#host.refuse(from, t.lane, t.epoch, t.slot, t.session, message);
    // Releases are a courtesy (the sender's accept window frees the copy anyway): a few in flight per
    // peer, so a descriptor flood cannot fill the node-wide pending-request budget.
    const n = this.#releasing.get(from) ?? 0;
    if (n >= MAX_RELEASES_IN_FLIGHT) return;
    this.#releasing.set(from, n + 1);
    const done = (): void => {
      const left = (this.#releasing.get(from) ?? 1) - 1;
      if (left > 0) this.#releasing.set(from, left);
      else this.#releasing.delete(from);
    };
    this.#host.request(from, PULL_HANDLER, { id: t.id, release: true }).then(done, done);
  }

  /** Pull the peer's transfers one at a time (bounded memory), in descriptor order. */
  async #pump(peer: PeerId): Promise<void> {
    const q = this.#queues.get(peer);
    if (q === undefined) return;
    // The queue is the pump's lifetime: `peerGone` drops it, and a pull that outlives it delivers nothing.
    const live = (): boolean => this.#queues.get(peer) === q;
    while (q.length > 0 && live()) {
      const t = q[0]!;
      let buf: Uint8Array | null = null;
      try {
        buf = await this.#pull(peer, t);
      } catch (e) {
        if (live()) {
          this.#host.unkept?.(peer, t.size);
          this.#host.refuse(
            peer,
            t.lane,
            t.epoch,
            t.slot,
            t.session,
            `staged transfer for stream ${t.muxSlot} (${t.size} bytes) failed: ${e instanceof Error ? e.message : String(e)}`,
          );
        }
      }
      if (!live()) return;
      q.shift();
      if (buf !== null) this.#host.deliver(peer, t.lane, buf);
      this.#host.pendingChanged?.(peer, t.lane, t.epoch, t.slot, t.session, -1);
    }
    if (q.length === 0 && live()) this.#queues.delete(peer);
  }

  async #pull(peer: PeerId, t: Incoming): Promise<Uint8Array> {
    const chunk = pullChunkLimit(this.#host.maxMessageSize(peer));
    const buf = new Uint8Array(t.size);
    this.assembling += t.size;
    this.#host.bytesChanged?.(t.size);
    try {
      let next = 0;
      let failed = false;
      const worker = async (): Promise<void> => {
        while (next < t.size && !failed) {
          const offset = next;
          const length = Math.min(chunk, t.size - offset);
          next += length;
          let part: unknown;
          try {
            part = await this.#host.request(peer, PULL_HANDLER, { id: t.id, offset, length });
          } catch (e) {
            failed = true;
            throw e;
          }
          if (!(part instanceof Uint8Array) || part.byteLength !== length) {
            failed = true;
            throw new LanemuxError(
              'ERR_PROTOCOL',
              `pull at ${offset} returned ${part instanceof Uint8Array ? part.byteLength : typeof part} instead of ${length} bytes`,
            );
          }
          buf.set(part, offset);
        }
      };
      const workers: Array<Promise<void>> = [];
      for (let i = 0; i < PULL_WINDOW && i * chunk < t.size; i++) workers.push(worker());
      // Wait for every worker, failed or not: no pull of this transfer (nor its buffer) outlives it,
      // so a peer that fails one chunk fast cannot make this side allocate the next transfer early.
      const settled = await Promise.allSettled(workers);
      for (const r of settled) if (r.status === 'rejected') throw r.reason;
      return buf;
    } finally {
      this.assembling -= t.size;
      this.#host.bytesChanged?.(-t.size);
    }
  }

  /** The node is closing: every pull loop stops and nothing more is delivered. */
  close(): void {
    for (const peer of [...this.#queues.keys()]) this.peerGone(peer);
    this.#closed = true;
  }

  /** The peer is gone: forget its queue; a pull loop in progress stops delivering. */
  peerGone(peer: PeerId): void {
    this.#queues.delete(peer);
  }
}
