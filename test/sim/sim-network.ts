/**
 * The simulator's network: a {@link TransportAdapter} like the memory one, but every frame crosses
 * the wire after a seeded per-link delay plus jitter. Each lane is its own connection, so batches
 * of different lanes overtake each other while one lane stays in order (arrival times never go
 * backwards on a connection). The world cuts links (in-flight frames lost), partitions pairs of
 * nodes (dials fail), and can inject one wire fault (a frame duplicated or lost) to prove the
 * invariants catch it.
 */
import type { LanemuxError } from '../../src/errors.ts';
import { AdmissionGate } from '../../src/transport/admission.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type {
  Admission,
  CloseMode,
  Connection,
  ConnectionReceiver,
  DialEvents,
  DialHandle,
  DialRequest,
  ListenHost,
  TransportAdapter,
} from '../../src/transport/port.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import type { SimWorld } from './sim-runtime.ts';

/** A wire fault injected once: the `nth` frame of at least `minBytes` sent anywhere is duplicated or lost. */
export interface WireFault {
  readonly kind: 'duplicate' | 'lose';
  readonly nth: number;
  readonly minBytes: number;
}

interface LinkShape {
  base: number;
  jitter: number;
}

const LIMITS = { highWaterMark: 64 * 1024, maxPendingBytes: 8 << 20 };

export class SimNetwork {
  readonly world: SimWorld;
  readonly #listeners = new Map<string, ListenHost>();
  readonly #conns = new Set<SimConn>();
  readonly #shapes = new Map<string, LinkShape>();
  readonly #blocked = new Set<string>();
  readonly fault: WireFault | undefined;
  #bigFrames = 0;
  faultFired = false;
  /** Frames and bytes written to the wire, and the most bytes ever in flight or unread at once. */
  frames = 0;
  bytes = 0;
  inFlightBytes = 0;
  peakInFlightBytes = 0;

  constructor(world: SimWorld, fault?: WireFault) {
    this.world = world;
    this.fault = fault;
  }

  /** The adapter of node `name` (it listens as `sim://name`). */
  adapter(name: string): TransportAdapter {
    return new SimAdapter(this, name);
  }

  /** Delay and jitter of the link between `a` and `b` (drawn once per pair from the seed). */
  shape(a: string, b: string): LinkShape {
    const key = pairKey(a, b);
    let s = this.#shapes.get(key);
    if (s === undefined) {
      const rng = this.world.rng;
      s = { base: rng.int(0, 20), jitter: rng.int(0, 15) };
      this.#shapes.set(key, s);
    }
    return s;
  }

  /** Abort every connection between `a` and `b`: what was in flight is lost. */
  cut(a: string, b: string): number {
    let n = 0;
    for (const c of [...this.#conns]) {
      if (pairKey(c.local, c.peer) !== pairKey(a, b)) continue;
      c.close(new TransportError('ERR_PEER_GONE', 'simulated network cut', { retryable: true }), 'abort');
      n++;
    }
    return n;
  }

  /** While partitioned, dials between `a` and `b` fail (and the world cuts what is open). */
  partition(a: string, b: string, on: boolean): void {
    if (on) this.#blocked.add(pairKey(a, b));
    else this.#blocked.delete(pairKey(a, b));
  }

  /** Pause or resume reading on every connection node `name` holds toward `peer`. */
  setReading(name: string, peer: string, reading: boolean): void {
    for (const c of this.#conns) if (c.local === name && c.peer === peer) reading ? c.resume() : c.pause();
  }

  /** @internal */
  register(c: SimConn): void {
    this.#conns.add(c);
  }
  /** @internal */
  unregister(c: SimConn): void {
    this.#conns.delete(c);
  }
  /** @internal */
  listener(name: string): ListenHost | undefined {
    return this.#listeners.get(name);
  }
  /** @internal */
  listen(name: string, host: ListenHost): void {
    this.#listeners.set(name, host);
  }
  /** @internal */
  unlisten(name: string): void {
    this.#listeners.delete(name);
  }
  /** @internal */
  blocked(a: string, b: string): boolean {
    return this.#blocked.has(pairKey(a, b));
  }
  /** @internal How many copies of this frame the wire carries (the injected fault, once). */
  copies(bytes: number): number {
    const f = this.fault;
    if (f === undefined || this.faultFired || bytes < f.minBytes) return 1;
    if (++this.#bigFrames < f.nth) return 1;
    this.faultFired = true;
    return f.kind === 'duplicate' ? 2 : 0;
  }
  /** Open connections (for the end-of-run check). */
  get openConns(): number {
    return this.#conns.size;
  }
}

const pairKey = (a: string, b: string): string => (a < b ? `${a}|${b}` : `${b}|${a}`);

class SimAdapter implements TransportAdapter {
  readonly name = 'sim';
  readonly dialSchemes = ['sim'] as const;
  readonly #net: SimNetwork;
  readonly #self: string;
  readonly #mine = new Set<SimConn>();
  #closed = false;

  constructor(net: SimNetwork, self: string) {
    this.#net = net;
    this.#self = self;
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    this.#net.listen(this.#self, host);
    return `sim://${this.#self}`;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    let cancelled = false;
    let conn: SimConn | undefined;
    request.runtime.macrotask(() => {
      if (cancelled) return;
      if (this.#closed) {
        events.fail(new TransportError('ERR_CLOSED', 'sim transport is closed'));
        return;
      }
      const name = request.address.slice('sim://'.length);
      const host = this.#net.listener(name);
      if (host === undefined || this.#net.blocked(this.#self, name)) {
        events.fail(new TransportError('ERR_CONNECT', `nothing answers at ${request.address}`, { retryable: true }));
        return;
      }
      const local = new SimConn(this.#net, this.#self, name, request.frameLimit, request.runtime, this.#mine);
      const remote = new SimConn(this.#net, name, this.#self, host.frameLimit, host.runtime, undefined);
      local.pair(remote);
      conn = local;
      host.accept(remote);
      events.open(local);
    });
    return {
      close: () => {
        cancelled = true;
        conn?.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
      },
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#net.unlisten(this.#self);
    const err = new TransportError('ERR_CLOSED', 'sim transport closed');
    for (const c of [...this.#mine]) c.close(err, 'graceful');
  }
}

/** One end of one lane connection. */
class SimConn implements Connection {
  readonly remote: string;
  readonly local: string;
  readonly peer: string;
  readonly #net: SimNetwork;
  readonly #rt: Runtime;
  readonly #mine: Set<SimConn> | undefined;
  readonly #gate: AdmissionGate;
  #other: SimConn | undefined;
  #receiver: ConnectionReceiver | undefined;
  #frameLimit: number;
  /** Frames arrived, not yet read. */
  #inbox: Uint8Array[] = [];
  #head = 0;
  /** Bytes we sent that have not been read by the other side yet (on the wire or in its inbox). */
  #inFlight = 0;
  /** The last arrival time of a frame we sent: a connection never reorders. */
  #lastArrival = 0;
  #paused = false;
  #scheduled = false;
  #closed = false;
  #remoteClose: LanemuxError | undefined;
  /** Bumped on close: frames still on the wire toward a closed end are dropped. */
  #generation = 0;

  constructor(
    net: SimNetwork,
    local: string,
    peer: string,
    frameLimit: number,
    rt: Runtime,
    mine: Set<SimConn> | undefined,
  ) {
    this.#net = net;
    this.local = local;
    this.peer = peer;
    this.remote = `sim://${peer}`;
    this.#frameLimit = frameLimit;
    this.#rt = rt;
    this.#mine = mine;
    mine?.add(this);
    net.register(this);
    this.#gate = new AdmissionGate(
      { buffered: () => this.#inFlight, write: (frame) => this.#transmit(frame) },
      LIMITS,
      this.remote,
    );
  }

  pair(other: SimConn): void {
    this.#other = other;
    other.#other = this;
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    this.#schedule();
  }

  setFrameLimit(bytes: number): void {
    this.#frameLimit = bytes;
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed)
      return Promise.reject(
        new TransportError('ERR_PEER_GONE', `connection to ${this.remote} is closed`, { retryable: true }),
      );
    const frame = new Uint8Array(head.byteLength + (body?.byteLength ?? 0));
    frame.set(head, 0);
    if (body !== undefined) frame.set(body, head.byteLength);
    return this.#gate.offer(frame);
  }

  bufferedAmount(): number {
    return this.#inFlight + this.#gate.pendingBytes;
  }

  pause(): boolean {
    this.#paused = true;
    return true;
  }

  resume(): void {
    this.#paused = false;
    this.#schedule();
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#generation++;
    this.#net.unregister(this);
    this.#mine?.delete(this);
    this.#gate.fail(reason);
    this.#dropInbox();
    const other = this.#other;
    this.#other = undefined;
    if (other !== undefined) {
      const err = new TransportError('ERR_PEER_GONE', `connection closed by peer (${reason.code}: ${reason.message})`, {
        retryable: true,
      });
      if (mode === 'abort') other.#peerClosed(err, true);
      // Graceful: the close travels behind what is on the wire.
      else
        this.#net.world.after(Math.max(0, this.#lastArrival - this.#net.world.time), () =>
          other.#peerClosed(err, false),
        );
    }
    this.#receiver?.closed(reason);
  }

  #dropInbox(): void {
    const other = this.#other;
    for (let i = this.#head; i < this.#inbox.length; i++) {
      const f = this.#inbox[i]!;
      if (other !== undefined) other.#inFlight -= f.byteLength;
      this.#net.inFlightBytes -= f.byteLength;
    }
    this.#inbox = [];
    this.#head = 0;
  }

  /** Put `frame` on the wire toward the other end, after this link's delay and jitter. */
  #transmit(frame: Uint8Array): void {
    const other = this.#other;
    if (other === undefined) return;
    const net = this.#net;
    const world = net.world;
    const shape = net.shape(this.local, this.peer);
    const copies = net.copies(frame.byteLength);
    net.frames++;
    net.bytes += frame.byteLength;
    for (let k = 0; k < copies; k++) {
      const at = Math.max(this.#lastArrival, world.time + shape.base + world.rng.int(0, shape.jitter));
      this.#lastArrival = at;
      this.#inFlight += frame.byteLength;
      net.inFlightBytes += frame.byteLength;
      if (net.inFlightBytes > net.peakInFlightBytes) net.peakInFlightBytes = net.inFlightBytes;
      const gen = other.#generation;
      world.after(at - world.time, () => {
        if (other.#generation !== gen || other.#closed) {
          // Lost with the connection.
          this.#inFlight -= frame.byteLength;
          net.inFlightBytes -= frame.byteLength;
          return;
        }
        other.#inbox.push(frame);
        other.#schedule();
      });
    }
  }

  #peerClosed(error: LanemuxError, abort: boolean): void {
    if (this.#closed) return;
    this.#other = undefined;
    this.#remoteClose = error;
    if (abort) {
      this.#generation++;
      for (let i = this.#head; i < this.#inbox.length; i++) this.#net.inFlightBytes -= this.#inbox[i]!.byteLength;
      this.#inbox = [];
      this.#head = 0;
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#closed || this.#receiver === undefined) return;
    this.#scheduled = true;
    this.#rt.macrotask(this.#deliver);
  }

  readonly #deliver = (): void => {
    this.#scheduled = false;
    const receiver = this.#receiver;
    if (this.#closed || receiver === undefined) return;
    const end = this.#inbox.length;
    while (this.#head < end && !this.#paused && !this.#closed) {
      const frame = this.#inbox[this.#head] as Uint8Array;
      this.#inbox[this.#head] = undefined as never;
      this.#head++;
      const other = this.#other;
      if (other !== undefined) other.#inFlight -= frame.byteLength;
      this.#net.inFlightBytes -= frame.byteLength;
      if (frame.byteLength > this.#frameLimit) {
        this.close(
          new TransportError(
            'ERR_FRAME_TOO_LARGE',
            `message of ${frame.byteLength} bytes from ${this.remote} exceeds the limit of ${this.#frameLimit} bytes`,
          ),
        );
        return;
      }
      receiver.message(frame);
    }
    if (this.#head === this.#inbox.length) {
      this.#inbox = [];
      this.#head = 0;
    }
    const sender = this.#other;
    if (sender !== undefined) sender.#gate.drain();
    if (this.#closed) return;
    if (this.#head < this.#inbox.length) {
      if (!this.#paused) this.#schedule();
    } else if (this.#remoteClose !== undefined && !this.#paused) {
      const error = this.#remoteClose;
      this.#closed = true;
      this.#net.unregister(this);
      this.#mine?.delete(this);
      this.#gate.fail(error);
      receiver.closed(error);
    }
  };
}
