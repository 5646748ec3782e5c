/**
 * {@link createDiscovery}: the {@link Discovery} of every adapter, around its {@link DiscoveryBackend}.
 * Here, once for every store: the registration's validation and encoding, validation of every
 * record read back, the `timeoutMs` bound on each operation, one registration operation at a time,
 * and the watch queues.
 */
import { defineAsyncDispose } from '../runtime/dispose.ts';
import { systemRuntime, type Runtime } from '../runtime/runtime.ts';
import type { BackendContext, DiscoveryBackend, WatchSink } from './backend.ts';
import type {
  Discovery,
  DiscoveryCloseOptions,
  DiscoveryWatch,
  Registration,
  RegistrationInput,
  WatchOptions,
} from './discovery.ts';
import { bounded, toDiscoveryError } from './bounded.ts';
import { asDiscoveryError, DiscoveryError } from './errors.ts';
import type { ResolvedDiscoveryOptions } from './options.ts';
import { decodeRegistration, encodeRegistration } from './record.ts';
import { WatchQueue } from './watch-queue.ts';
import { workerHex, workerIdOf, type WorkerIdInput } from './worker-id.ts';
import { ConfigError } from '../errors.ts';

/**
 * Build a {@link Discovery} named `name` (in messages) over the backend `make` returns.
 * For adapter authors; applications call an adapter (`staticDiscovery`, `etcdDiscovery`, `natsDiscovery`).
 */
export function createDiscovery(
  name: string,
  options: ResolvedDiscoveryOptions,
  make: (context: BackendContext) => DiscoveryBackend,
): Discovery {
  return new DiscoveryClient(name, options, make);
}

class DiscoveryClient implements Discovery {
  readonly #name: string;
  readonly #options: ResolvedDiscoveryOptions;
  readonly #runtime: Runtime;
  readonly #backend: DiscoveryBackend;
  readonly #reportFn: (error: DiscoveryError) => void;
  readonly #watches = new Set<WatchQueue>();
  /** The worker this client registered (or tried to): a timed-out register may still land. */
  #hex: string | undefined;
  /** Registration operations run one at a time, in call order. */
  #chain: Promise<unknown> = Promise.resolve();
  #closed: Promise<void> | undefined;

  constructor(name: string, options: ResolvedDiscoveryOptions, make: (context: BackendContext) => DiscoveryBackend) {
    this.#name = name;
    this.#options = options;
    this.#runtime = options.runtime ?? systemRuntime();
    const onError = options.onError;
    this.#reportFn = (error) => {
      if (onError === undefined) return;
      try {
        onError(error);
      } catch {
        // The application's handler failing must not stop the keep-alive.
      }
    };
    this.#backend = make({ options, runtime: this.#runtime, report: this.#reportFn });
  }

  register(input: RegistrationInput): Promise<void> {
    let encoded: ReturnType<typeof encodeRegistration>;
    try {
      encoded = encodeRegistration(input, this.#options.maxRecordBytes);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#serial(async () => {
      this.#throwIfClosed();
      const previous = this.#hex;
      if (previous !== undefined && previous !== encoded.hex) {
        await this.#bounded(this.#backend.deregister(previous), `deregister ${previous}`);
        this.#hex = undefined;
      }
      this.#hex = encoded.hex;
      await this.#bounded(this.#backend.register(encoded.hex, encoded.text), `register ${encoded.hex}`);
    });
  }

  deregister(): Promise<void> {
    return this.#serial(async () => {
      this.#throwIfClosed();
      const hex = this.#hex;
      if (hex === undefined) return;
      this.#hex = undefined;
      await this.#bounded(this.#backend.deregister(hex), `deregister ${hex}`);
    });
  }

  async resolve(workerId: WorkerIdInput): Promise<Registration | undefined> {
    const hex = workerHex(workerId);
    this.#throwIfClosed();
    const record = await this.#bounded(this.#backend.read(hex), `resolve ${hex}`);
    if (record === undefined) return undefined;
    return decodeRegistration(record.value, record.key, hex, this.#options.maxRecordBytes);
  }

  watch(options: WatchOptions = {}): DiscoveryWatch {
    const max = options.maxQueue ?? this.#options.maxWatchQueue;
    if (!Number.isInteger(max) || max < 1 || max > 1_000_000)
      throw new ConfigError('maxQueue', 'maxQueue must be an integer in 1..1000000', { where: 'watch' });
    let stop: (() => void) | undefined;
    let stopped = false;
    const signal = options.signal;
    const onAbort = (): void => queue.close();
    const queue = new WatchQueue(max, () => {
      stopped = true;
      this.#watches.delete(queue);
      signal?.removeEventListener('abort', onAbort);
      stop?.();
    });
    if (this.#closed !== undefined) {
      queue.fail(this.#closedError());
      return queue;
    }
    if (signal?.aborted) {
      queue.close();
      return queue;
    }
    this.#watches.add(queue);
    signal?.addEventListener('abort', onAbort, { once: true });
    const maxBytes = this.#options.maxRecordBytes;
    let synced = false;
    const sink: WatchSink = {
      put(key, hex, value) {
        let registration: Registration;
        try {
          registration = decodeRegistration(value, key, hex, maxBytes);
        } catch (e) {
          const error = e instanceof DiscoveryError ? e : new DiscoveryError('ERR_DISCOVERY_INVALID_RECORD', String(e));
          queue.push({ type: 'invalid', key, workerId: hex === undefined ? undefined : workerIdOf(hex), error });
          return;
        }
        queue.push({ type: 'put', workerId: registration.workerId, registration });
      },
      delete(_key, hex) {
        if (hex !== undefined) queue.push({ type: 'delete', workerId: workerIdOf(hex) });
      },
      room: () => queue.room(),
      synced() {
        if (synced) return;
        synced = true;
        queue.push({ type: 'synced' });
      },
      fail: (error) => queue.fail(asDiscoveryError(error, `${this.#name} watch`)),
    };
    try {
      stop = this.#backend.watch(sink);
    } catch (e) {
      sink.fail(e);
    }
    // The backend may have failed the watch before returning its stop.
    if (stopped) stop?.();
    return queue;
  }

  close(options: DiscoveryCloseOptions = {}): Promise<void> {
    if (this.#closed !== undefined) return this.#closed;
    const deregister = options.deregister ?? true;
    this.#closed = (async () => {
      for (const w of [...this.#watches]) w.close();
      // Let a registration in flight finish first, so the removal comes after it.
      await this.#chain.catch(() => undefined);
      const hex = this.#hex;
      this.#hex = undefined;
      if (deregister && hex !== undefined) {
        try {
          await this.#bounded(this.#backend.deregister(hex), `deregister ${hex}`);
        } catch (e) {
          this.#report(e, `deregister ${hex}`);
        }
      }
      try {
        await this.#bounded(this.#backend.close(), 'close');
      } catch (e) {
        this.#report(e, 'close');
      }
    })();
    return this.#closed;
  }

  #serial<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(op, op);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  #throwIfClosed(): void {
    if (this.#closed !== undefined) throw this.#closedError();
  }

  #closedError(): DiscoveryError {
    return new DiscoveryError('ERR_DISCOVERY_CLOSED', `${this.#name} is closed`);
  }

  #report(error: unknown, what: string): void {
    this.#reportFn(toDiscoveryError(error, `${this.#name} ${what}`));
  }

  #bounded<T>(promise: Promise<T>, what: string): Promise<T> {
    return bounded(this.#runtime, promise, this.#options.timeoutMs, `${this.#name} ${what}`);
  }
}

// `await using discovery = etcdDiscovery(…)` closes (and deregisters) at the end of the scope.
defineAsyncDispose(DiscoveryClient.prototype);
