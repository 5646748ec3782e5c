/**
 * In-process transport adapter: pairs of connections inside one JavaScript realm, for tests and
 * same-process use. Runtime-agnostic.
 *
 * Delivery is asynchronous (a macrotask of the node's runtime per burst, not a microtask, so timers
 * are never starved, and a manual clock's test drives it) and ordered per connection. `admissionLimit` bounds the bytes sent but not yet delivered: a receiver
 * that is paused (or slow) makes the sender's admission wait exactly as a full socket would, which
 * is how tests stall it.
 *
 * @example
 * ```ts
 * const network = createMemoryNetwork();
 * const a = await createMessenger({ transports: [memoryTransport({ network, name: 'a' })] });
 * const b = await createMessenger({ transports: [memoryTransport({ network })] });
 * const peer = await b.connect('memory://a');
 * ```
 *
 * @packageDocumentation
 */
import { authenticateOption, credentialOption, type Authenticate, type CredentialSource } from '../transport/auth.ts';
import * as z from '../schema.ts';
import type { LanemuxError } from '../errors.ts';
import { AdmissionGate } from '../transport/admission.ts';
import { TransportError } from '../transport/errors.ts';
import {
  DEFAULT_HIGH_WATER_MARK,
  DEFAULT_MAX_PENDING_BYTES,
  type Admission,
  type CloseMode,
  type Connection,
  type ConnectionReceiver,
  type DialEvents,
  type DialHandle,
  type DialRequest,
  type ListenHost,
  type TransportAdapter,
} from '../transport/port.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { parseOptions } from '../validate.ts';
import { int } from '../validate.ts';

/** A namespace of memory listeners; messengers on the same network can dial each other. */
export interface MemoryNetwork {
  /** Listener names currently registered (for diagnostics). */
  readonly names: () => readonly string[];
}

/** A listening adapter as the network sees it: where to hand new connections, and whose they are. */
interface Listener {
  readonly host: ListenHost;
  /** The listening adapter's connections: accepted ones are registered here, not with the dialler. */
  readonly conns: Set<MemoryConn>;
}

class Network implements MemoryNetwork {
  readonly listeners = new Map<string, Listener>();
  counter = 0;
  names = (): readonly string[] => [...this.listeners.keys()];
}

/** Create an isolated memory network. */
export function createMemoryNetwork(): MemoryNetwork {
  return new Network();
}

let defaultNetwork: Network | undefined;

/** Options of {@link memoryTransport}. */
export interface MemoryTransportOptions {
  /** The network to listen and dial on. Defaults to one process-wide network. */
  readonly network?: MemoryNetwork;
  /** Listen as `memory://<name>`. Defaults to a unique generated name. */
  readonly name?: string;
  /** Whether to listen at all. Defaults to true. */
  readonly listen?: boolean;
  /**
   * Bytes sent on a connection but not yet delivered before admission waits: the in-memory
   * equivalent of a socket's high-water mark. Defaults to 1 MiB.
   */
  readonly admissionLimit?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** Authenticate each inbound peer from its HELLO credential (see `Authenticate`). Defaults to the messenger's. */
  readonly authenticate?: Authenticate;
  /**
   * Credential presented in the HELLO of every connect and reconnect: a string, or a function called
   * each time (a browser refreshes a short-lived token). Defaults to the messenger's `credential`.
   */
  readonly credential?: CredentialSource;
}

const optionsSchema = z.object({
  network: z.optional(
    z.custom<MemoryNetwork>((v) => v instanceof Network, 'not a MemoryNetwork from createMemoryNetwork()'),
  ),
  name: z.optional(z.string().check(z.minLength(1), z.maxLength(200), z.regex(/^[^/\s]+$/, 'no slashes or spaces'))),
  listen: z._default(z.boolean(), true),
  admissionLimit: z._default(int(1, 2 ** 40), DEFAULT_HIGH_WATER_MARK),
  maxPendingBytes: z._default(int(1024, 2 ** 40), DEFAULT_MAX_PENDING_BYTES),
  ...authenticateOption,
  ...credentialOption,
});

/** Create an in-process transport adapter. */
export function memoryTransport(options: MemoryTransportOptions = {}): TransportAdapter {
  const o = parseOptions(optionsSchema, options, 'memoryTransport');
  const network = (o.network as Network | undefined) ?? (defaultNetwork ??= new Network());
  const adapter = new MemoryAdapter(network, o.name, o.listen, {
    highWaterMark: o.admissionLimit,
    maxPendingBytes: o.maxPendingBytes,
  });
  adapter.authenticate = o.authenticate;
  adapter.credential = o.credential;
  return adapter;
}

class MemoryAdapter implements TransportAdapter {
  readonly name = 'memory';
  readonly dialSchemes = ['memory'] as const;
  authenticate: Authenticate | undefined;
  credential: CredentialSource | undefined;
  readonly #network: Network;
  readonly #limits: { highWaterMark: number; maxPendingBytes: number };
  readonly #conns = new Set<MemoryConn>();
  readonly #listen: boolean;
  #name: string | undefined;
  #closed = false;

  constructor(
    network: Network,
    name: string | undefined,
    listen: boolean,
    limits: { highWaterMark: number; maxPendingBytes: number },
  ) {
    this.#network = network;
    this.#name = name;
    this.#listen = listen;
    this.#limits = limits;
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    if (!this.#listen) return undefined;
    const name = this.#name ?? `node-${++this.#network.counter}`;
    if (this.#network.listeners.has(name)) {
      throw new TransportError(
        'ERR_ADDRESS_IN_USE',
        `memoryTransport cannot listen on memory://${name}: the name is already listening on this network`,
        { retryable: true },
      );
    }
    this.#name = name;
    this.#network.listeners.set(name, { host, conns: this.#conns });
    return `memory://${name}`;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    let cancelled = false;
    let conn: MemoryConn | undefined;
    request.runtime.macrotask(() => {
      if (cancelled) return;
      if (this.#closed) {
        events.fail(new TransportError('ERR_CLOSED', 'memory transport is closed'));
        return;
      }
      const name = request.address.slice('memory://'.length);
      const listener = this.#network.listeners.get(name);
      if (listener === undefined) {
        events.fail(new TransportError('ERR_CONNECT', `nothing listens on ${request.address}`, { retryable: true }));
        return;
      }
      const local = new MemoryConn(`memory://${name}`, request.frameLimit, this.#limits, this.#conns, request.runtime);
      // The accepted end belongs to the listening adapter: closing this (dialling) adapter closes only
      // its own end, gracefully, so what it already sent is still delivered to the listener. Each end
      // delivers on its own node's runtime.
      const remote = new MemoryConn(
        `memory://${this.#name ?? 'dialer'}`,
        listener.host.frameLimit,
        this.#limits,
        listener.conns,
        listener.host.runtime,
      );
      local.pair(remote);
      conn = local;
      listener.host.accept(remote);
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
    if (this.#name !== undefined && this.#network.listeners.get(this.#name)?.conns === this.#conns) {
      this.#network.listeners.delete(this.#name);
    }
    const err = new TransportError('ERR_CLOSED', 'memory transport closed');
    for (const c of [...this.#conns]) c.close(err, 'graceful');
  }
}

class MemoryConn implements Connection {
  readonly remote: string;
  #other: MemoryConn | undefined;
  #receiver: ConnectionReceiver | undefined;
  #frameLimit: number;
  readonly #gate: AdmissionGate;
  readonly #registry: Set<MemoryConn>;
  readonly #rt: Runtime;
  // Frames sent to us, not yet delivered. A FIFO with a moving head.
  #inbox: Uint8Array[] = [];
  #head = 0;
  /** Bytes we sent that still sit in the other side's inbox. */
  #inFlight = 0;
  #paused = false;
  #scheduled = false;
  #closed = false;
  /** The other side closed; deliver this after the inbox drains (graceful) or at once (abort). */
  #remoteClose: LanemuxError | undefined;

  constructor(
    remote: string,
    frameLimit: number,
    limits: { highWaterMark: number; maxPendingBytes: number },
    registry: Set<MemoryConn>,
    rt: Runtime,
  ) {
    this.remote = remote;
    this.#frameLimit = frameLimit;
    this.#registry = registry;
    this.#rt = rt;
    registry.add(this);
    this.#gate = new AdmissionGate(
      {
        buffered: () => this.#inFlight,
        write: (frame) => {
          const other = this.#other;
          if (other !== undefined) other.#enqueue(frame, this);
        },
      },
      limits,
      remote,
    );
  }

  pair(other: MemoryConn): void {
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
    this.#registry.delete(this);
    this.#gate.fail(reason);
    this.#inbox = [];
    this.#head = 0;
    const other = this.#other;
    this.#other = undefined;
    if (other !== undefined)
      other.#peerClosed(
        new TransportError('ERR_PEER_GONE', `connection closed by peer (${reason.code}: ${reason.message})`, {
          retryable: true,
        }),
        mode,
      );
    this.#receiver?.closed(reason);
  }

  #enqueue(frame: Uint8Array, from: MemoryConn): void {
    if (this.#closed) return;
    from.#inFlight += frame.byteLength;
    this.#inbox.push(frame);
    this.#schedule();
  }

  #peerClosed(error: LanemuxError, mode: CloseMode): void {
    if (this.#closed) return;
    this.#other = undefined;
    this.#remoteClose = error;
    if (mode === 'abort') {
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
    // Deliver what is here now; frames that arrive meanwhile wait for the next macrotask, so two
    // chatty peers cannot keep one macrotask running forever.
    const end = this.#inbox.length;
    while (this.#head < end && !this.#paused && !this.#closed) {
      const frame = this.#inbox[this.#head] as Uint8Array;
      this.#inbox[this.#head] = undefined as never;
      this.#head++;
      const other = this.#other;
      if (other !== undefined) other.#inFlight -= frame.byteLength;
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
    } else if (this.#remoteClose !== undefined) {
      const error = this.#remoteClose;
      this.#closed = true;
      this.#registry.delete(this);
      this.#gate.fail(error);
      receiver.closed(error);
    }
  };
}
