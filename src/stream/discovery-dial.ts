/**
 * A node's discovery (`createNode({ discovery })`): it registers the node once it listens and
 * deregisters it on close, and it finds the worker an anchor handle names when no link to it
 * exists: resolve the worker id, take the addresses a transport of this node dials, connect, then
 * the attach (or ticket open) goes on. Attaches to the same worker share one resolve and dial; the
 * dials in flight are bounded, and so is each step. Links that exist never touch discovery, so
 * they keep working while the store is out of reach.
 *
 * @packageDocumentation
 */
import { bounded } from '../discovery/bounded.ts';
import type { Discovery, Registration } from '../discovery/discovery.ts';
import { DiscoveryError } from '../discovery/errors.ts';
import { ConfigError, LanemuxError } from '../errors.ts';
import type { Messenger, PeerId, WaitOptions } from '../messenger/types.ts';
import type { Runtime } from '../runtime/runtime.ts';
import type { TransportAdapter } from '../transport/port.ts';
import {
  DEFAULT_DISCOVERY_CONNECT_TIMEOUT_MS,
  DEFAULT_DISCOVERY_TIMEOUT_MS,
  DEFAULT_MAX_PENDING_DIALS,
  nodeDiscoveryOf,
  type NodeDiscoveryOptions,
} from './discovery-options.ts';
import { StreamError } from './errors.ts';
import { waitForPeer } from './peer-wait.ts';

/** Most addresses of one record tried in one dial (a valid record holds at most 16). */
const MAX_TRIED = 16;

/** A listen address peers elsewhere cannot dial: the wildcard host. */
const WILDCARD = /^[a-z][a-z0-9+.-]*:\/\/(?:0\.0\.0\.0|\[::\]|::)(?:[:/]|$)/i;

/** `tcp://h:p` → `tcp` (lower case); '' when the address has no scheme. */
const schemeOf = (address: string): string => {
  const i = address.indexOf('://');
  return i < 0 ? '' : address.slice(0, i).toLowerCase();
};

/** One worker's resolve + dial, shared by the attaches waiting for it. */
interface PendingDial {
  readonly promise: Promise<PeerId>;
  /** Settle it now (the node closed); the dial itself runs out on its bounds. */
  readonly fail: (error: StreamError) => void;
}

/** Registers the node and dials the workers it finds through discovery. */
export class DiscoveryDialer {
  readonly #m: Messenger;
  readonly #rt: Runtime;
  readonly #o: NodeDiscoveryOptions;
  readonly #client: Discovery;
  /** URL schemes the node's transports dial; undefined for a messenger passed in (every address is tried). */
  readonly #schemes: ReadonlySet<string> | undefined;
  /** One resolve + dial per worker, shared by its waiting attaches. */
  readonly #pending = new Map<PeerId, PendingDial>();
  #registered = false;
  #closed = false;

  /** The dialer of `createNode({ discovery })` (validated already); null without one. */
  static of(
    discovery: Discovery | NodeDiscoveryOptions | undefined,
    transports: readonly TransportAdapter[] | undefined,
    messenger: Messenger,
    runtime: Runtime,
  ): DiscoveryDialer | null {
    if (discovery === undefined) return null;
    const options = nodeDiscoveryOf(discovery) as NodeDiscoveryOptions;
    // With a messenger passed in, which schemes it dials is unknown: every address is tried.
    return new DiscoveryDialer(
      messenger,
      runtime,
      options,
      transports?.flatMap((t) => t.dialSchemes),
    );
  }

  constructor(
    messenger: Messenger,
    runtime: Runtime,
    options: NodeDiscoveryOptions,
    schemes: readonly string[] | undefined,
  ) {
    this.#m = messenger;
    this.#rt = runtime;
    this.#o = options;
    this.#client = options.client;
    this.#schemes = schemes === undefined ? undefined : new Set(schemes.map((s) => s.toLowerCase()));
  }

  /** Register the node (see `NodeDiscoveryOptions.register`); rejects when the store does not take it. */
  async register(): Promise<void> {
    const r = this.#o.register;
    const listen = this.#m.addresses;
    if (r === false || (r === undefined && listen.length === 0)) return;
    const addresses = r?.addresses ?? listenAddresses(listen);
    const self = this.#m.self;
    this.#registered = true;
    await this.#bound(
      this.#client.register({
        workerId: self.workerId,
        addresses,
        lanes: r?.lanes ?? self.lanes,
        metadata: r?.metadata,
        credential: r?.credential,
      }),
      `discovery register of worker ${self.id}`,
    );
  }

  /**
   * The connected peer `peer`, as `waitForPeer` finds it (at once, or once a re-dial brings it
   * back); when nothing links to it, through discovery. Rejects `ERR_UNKNOWN_PEER` (retryable)
   * when discovery has no record of it, `ERR_DISCOVERY_UNAVAILABLE` (retryable) when the store does
   * not answer within `timeoutMs`, or with the error of the last address dialled.
   */
  peer(peer: PeerId, options: WaitOptions): Promise<PeerId> {
    if (this.#m.peer(peer) !== undefined) return Promise.resolve(peer);
    return waitForPeer(this.#m, peer, options).catch((e: unknown) => {
      if (!(e instanceof LanemuxError && e.code === 'ERR_UNKNOWN_PEER')) throw e;
      return this.#found(peer, options.signal);
    });
  }

  /** Fail the dials in flight with `ERR_CLOSED` and deregister, waiting at most `timeoutMs`. Never rejects. */
  async close(): Promise<void> {
    this.#closed = true;
    // No listener per waiter on a node-wide signal: the shared dials are failed here, each once.
    for (const dial of this.#pending.values()) dial.fail(closedError());
    this.#pending.clear();
    try {
      if (this.#registered) await this.#bound(this.#client.deregister(), 'discovery deregister');
    } catch {
      // The store is out of reach: the registration's lease expires on its own.
    }
    if (this.#o.closeClient === true) await this.#bound(this.#client.close(), 'discovery close').catch(() => undefined);
  }

  #found(peer: PeerId, signal: AbortSignal | undefined): Promise<PeerId> {
    if (this.#closed) return Promise.reject(closedError());
    if (signal?.aborted) return Promise.reject(abortedError(signal));
    let dial = this.#pending.get(peer);
    if (dial === undefined) {
      const max = this.#o.maxPendingDials ?? DEFAULT_MAX_PENDING_DIALS;
      if (this.#pending.size >= max)
        return Promise.reject(
          new DiscoveryError(
            'ERR_DISCOVERY_UNAVAILABLE',
            `${max} workers are being resolved and dialled already (maxPendingDials): try again`,
            { retryable: true },
          ),
        );
      let fail!: (error: StreamError) => void;
      const promise = new Promise<PeerId>((resolve, reject) => {
        fail = reject;
        this.#dial(peer).then(resolve, reject);
      });
      const entry: PendingDial = { promise, fail };
      const forget = (): void => {
        if (this.#pending.get(peer) === entry) this.#pending.delete(peer);
      };
      promise.then(forget, forget);
      this.#pending.set(peer, entry);
      dial = entry;
    }
    return signal === undefined ? dial.promise : waitOrAbort(dial.promise, signal);
  }

  async #dial(peer: PeerId): Promise<PeerId> {
    const found = await this.#bound(this.#client.resolve(peer), `discovery resolve of worker ${peer}`);
    if (found === undefined)
      throw new StreamError(
        'ERR_UNKNOWN_PEER',
        `no link to worker ${peer}, and discovery has no record of it (never registered, deregistered, or its lease expired)`,
        { retryable: true },
      );
    const addresses = this.#candidates(found, peer);
    const connect = this.#o.connect;
    const reconnect = connect?.reconnect;
    const deadline = this.#rt.now() + (connect?.timeoutMs ?? DEFAULT_DISCOVERY_CONNECT_TIMEOUT_MS);
    let last: unknown;
    for (const address of addresses) {
      const left = Math.ceil(deadline - this.#rt.now());
      if (left <= 0) break;
      try {
        if (this.#closed) throw closedError();
        const info = await this.#m.connect(
          address,
          reconnect === undefined ? { timeoutMs: left } : { timeoutMs: left, reconnect },
        );
        if (info.id === peer) return peer;
        last = new StreamError(
          'ERR_UNKNOWN_PEER',
          `${address}, where discovery has worker ${peer}, reached worker ${info.id}: the record is stale`,
          { retryable: true },
        );
      } catch (e) {
        if (this.#closed) throw closedError();
        last = e;
      }
    }
    throw last;
  }

  /** The record's addresses this node may dial, in the record's order; refuses a record of another worker. */
  #candidates(r: Registration, peer: PeerId): string[] {
    if (r.workerId !== BigInt(`0x${peer}`))
      throw new DiscoveryError(
        'ERR_DISCOVERY_INVALID_RECORD',
        `discovery answered the resolve of worker ${peer} with a record of another worker`,
      );
    const all = Object.values(r.addresses ?? {})
      .slice(0, MAX_TRIED)
      .filter((a): a is string => typeof a === 'string');
    const schemes = this.#schemes;
    const usable = schemes === undefined ? all : all.filter((a) => schemes.has(schemeOf(a)));
    if (usable.length === 0)
      throw new StreamError(
        'ERR_ATTACH_REFUSED',
        `worker ${peer} is registered at ${all.join(', ') || 'no address'}, and no transport of this node dials ${all.length > 1 ? 'any of them' : 'it'}`,
      );
    return usable;
  }

  #bound<T>(promise: Promise<T>, what: string): Promise<T> {
    return bounded(this.#rt, promise, this.#o.timeoutMs ?? DEFAULT_DISCOVERY_TIMEOUT_MS, what);
  }
}

/** The listen addresses as a registration's, each under its scheme (`tcp`, then `tcp.2`, …). */
function listenAddresses(listen: readonly string[]): Record<string, string> {
  if (listen.length === 0)
    throw new ConfigError(
      'discovery.register.addresses',
      'the node listens on nothing: give discovery.register.addresses',
      { where: 'createNode' },
    );
  const out: Record<string, string> = {};
  for (const address of listen) {
    if (WILDCARD.test(address))
      throw new ConfigError(
        'discovery.register.addresses',
        `the node listens on ${address}, which peers elsewhere cannot dial: give discovery.register.addresses`,
        { where: 'createNode' },
      );
    const scheme = schemeOf(address) || 'addr';
    let key = scheme;
    for (let n = 2; Object.hasOwn(out, key); n++) key = `${scheme}.${n}`;
    out[key] = address;
  }
  return out;
}

/** `dial` for one waiter: its own abort ends only its wait. */
function waitOrAbort(dial: Promise<PeerId>, signal: AbortSignal): Promise<PeerId> {
  return new Promise<PeerId>((resolve, reject) => {
    const onAbort = (): void => reject(abortedError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    dial.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function closedError(): StreamError {
  return new StreamError('ERR_CLOSED', 'the node is closed');
}

function abortedError(signal: AbortSignal): StreamError {
  return new StreamError('ERR_ABORTED', 'the attach was aborted', { cause: signal.reason });
}
