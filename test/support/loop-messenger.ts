/**
 * An in-process Messenger pair for deterministic mux and stream tests: messages are delivered in
 * order on a microtask, every batch written is recorded, and admission can be stalled (the gate
 * then holds exactly one frame) or refused.
 */
import type {
  Admission,
  DialEndedEvent,
  Messenger,
  MessageHandler,
  MessengerErrorEvent,
  MessengerStats,
  PeerGoneEvent,
  PeerInfo,
  RequestHandler,
} from '../../src/messenger/types.ts';

let nextWorker = 0x1000n;

export interface LoopOptions {
  lanes?: number;
  maxMessageSize?: number;
  transportKeys?: string[];
}

/** A batch as it went on the wire. */
export interface SentBatch {
  lane: number;
  payload: Uint8Array;
}

export class LoopMessenger implements Messenger {
  readonly self: PeerInfo;
  readonly addresses: readonly string[];
  remote: LoopMessenger | null = null;
  readonly sent: SentBatch[] = [];
  #handlers = new Map<string, MessageHandler>();
  #batch: MessageHandler[] = [];
  #requests = new Map<string, RequestHandler>();
  #gone = new Set<(e: PeerGoneEvent) => void>();
  #peerListeners = new Set<(p: PeerInfo) => void>();
  /** Admission: 'open' admits synchronously; 'stall' parks the next frame; 'refuse' rejects. */
  mode: 'open' | 'stall' | 'refuse' = 'open';
  #stalled: Array<{ resolve: () => void; deliver: () => void }> = [];
  /** Hold deliveries (the reader is stalled) until `resumeDelivery`. */
  #held: Array<() => void> | null = null;
  closed = false;
  pingFails = false;

  constructor(options: LoopOptions = {}) {
    const workerId = nextWorker++;
    this.self = {
      id: workerId.toString(16).padStart(16, '0'),
      workerId,
      instanceId: `loop-${workerId}`,
      lanes: options.lanes ?? 1,
      maxMessageSize: options.maxMessageSize ?? 1 << 20,
      transportKeys: options.transportKeys ?? ['messenger-mux-v2'],
      protocolVersion: 1,
      address: `loop://${workerId.toString(16)}`,
      epoch: 1,
    };
    this.addresses = [this.self.address!];
  }

  /** Link two messengers both ways. */
  static pair(a: LoopOptions = {}, b: LoopOptions = {}): [LoopMessenger, LoopMessenger] {
    const x = new LoopMessenger(a);
    const y = new LoopMessenger(b);
    x.remote = y;
    y.remote = x;
    return [x, y];
  }

  on(name: string, handler: MessageHandler): void {
    this.#handlers.set(name, handler);
  }
  registerBatchHandler(lane: number, handler: MessageHandler): void {
    this.#batch[lane] = handler;
  }
  handle(name: string, handler: RequestHandler): void {
    this.#requests.set(name, handler);
  }

  #deliver(fn: () => void): void {
    if (this.#held) this.#held.push(fn);
    else queueMicrotask(fn);
  }

  /** Stop delivering to the remote side (its reader stalls) until {@link resumeDelivery}. */
  holdDelivery(): void {
    this.#held ??= [];
  }
  resumeDelivery(): void {
    const h = this.#held ?? [];
    this.#held = null;
    for (const fn of h) queueMicrotask(fn);
  }

  send(_peer: string, lane: number, name: string, payload: Uint8Array): Admission {
    const r = this.remote!;
    const copy = payload.slice();
    this.#deliver(() => r.#handlers.get(name)?.(this.self.id, lane, copy));
    return true;
  }

  sendBatch(_peer: string, lane: number, payload: Uint8Array): Admission {
    if (this.closed || this.remote === null || this.remote.closed) return Promise.reject(new Error('peer gone'));
    if (this.mode === 'refuse') return Promise.reject(new Error('refused'));
    const copy = payload.slice();
    const r = this.remote;
    const deliver = (): void => {
      this.sent.push({ lane, payload: copy });
      this.#deliver(() => {
        if (!r.closed) r.#batch[lane]?.(this.self.id, lane, copy);
      });
    };
    if (this.mode === 'stall') {
      return new Promise<void>((resolve) => this.#stalled.push({ resolve, deliver }));
    }
    deliver();
    return true;
  }

  /** Admit every stalled frame (in order) and go back to synchronous admission. */
  release(): void {
    this.mode = 'open';
    const s = this.#stalled;
    this.#stalled = [];
    for (const x of s) {
      x.deliver();
      x.resolve();
    }
  }

  /** Frames parked on admission. */
  get stalledCount(): number {
    return this.#stalled.length;
  }

  async request(
    _peer: string,
    name: string,
    body: unknown,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<unknown> {
    const r = this.remote!;
    options.signal?.throwIfAborted();
    const h = r.#requests.get(name);
    if (!h) throw new Error(`unknown handler ${name}`);
    await Promise.resolve();
    return structuredClone(await h(this.self.id, structuredClone(body), new AbortController().signal));
  }

  async connect(): Promise<PeerInfo> {
    return this.remote!.self;
  }
  peer(id: string): PeerInfo | undefined {
    return this.remote && this.remote.self.id === id && !this.remote.closed ? this.remote.self : undefined;
  }
  lanes(): number {
    return Math.min(this.self.lanes, this.remote?.self.lanes ?? 1);
  }
  maxMessageSize(): number {
    return this.remote?.self.maxMessageSize ?? 0;
  }
  async ping(): Promise<number> {
    if (this.pingFails || this.remote?.closed) throw new Error('ping failed');
    return 0;
  }
  onPeer(listener: (p: PeerInfo) => void): () => void {
    this.#peerListeners.add(listener);
    return () => this.#peerListeners.delete(listener);
  }
  onPeerGone(listener: (e: PeerGoneEvent) => void): () => void {
    this.#gone.add(listener);
    return () => this.#gone.delete(listener);
  }
  /** Report the peer gone for a given (older) link epoch without closing anything. */
  reportGone(epoch: number): void {
    const r = this.remote;
    if (!r) return;
    for (const l of this.#gone)
      l({
        peer: r.self.id,
        code: 'ERR_PEER_GONE',
        reason: 'superseded link',
        epoch,
        error: new Error('superseded link'),
      });
  }

  /** Simulate the connection dying: both sides report the other gone. */
  kill(): void {
    const r = this.remote;
    for (const [m, other] of [
      [this, r],
      [r, this],
    ] as const) {
      if (!m || !other) continue;
      for (const l of m.#gone)
        l({
          peer: other.self.id,
          code: 'ERR_PEER_GONE',
          reason: 'connection killed',
          epoch: 1,
          error: new Error('connection killed'),
        });
    }
    this.closed = true;
    if (r) r.closed = true;
  }
  async close(): Promise<void> {
    this.closed = true;
  }
  peers(): readonly PeerInfo[] {
    return this.remote && !this.remote.closed ? [this.remote.self] : [];
  }
  disconnect(): void {
    this.kill();
  }
  bufferedAmount(): number {
    return 0;
  }
  pause(): boolean {
    this.remote?.holdDelivery();
    return true;
  }
  resume(): void {
    this.remote?.resumeDelivery();
  }
  onError(_listener: (e: MessengerErrorEvent) => void): () => void {
    return () => {};
  }
  /** A loop pair never dials. */
  onDialEnded(_listener: (e: DialEndedEvent) => void): () => void {
    return () => {};
  }
  stats(): MessengerStats {
    return { handlerErrors: 0, unknownHandler: 0, remoteNotices: 0, lateReplies: 0, malformed: 0 } as MessengerStats;
  }
}
