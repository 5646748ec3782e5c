/**
 * Nodes on one manual clock over an in-process memory network, for the drain suites: time passes
 * only when a test says so, so a drain's deadline is hit to the millisecond and nothing sleeps.
 */
import { createMemoryNetwork, memoryTransport, type MemoryNetwork } from '../../src/adapters/memory.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type { Connection, TransportAdapter } from '../../src/transport/port.ts';
import { ManualRuntime } from './manual-runtime.ts';

export class DrainHarness {
  readonly rt = new ManualRuntime();
  readonly network: MemoryNetwork = createMemoryNetwork();
  readonly nodes: LanemuxNode[] = [];
  readonly #cuts: Array<() => void> = [];

  /** A node listening at `memory://<name>` (none: dialling only), on the manual clock. */
  async node(name: string | null, options: Partial<NodeOptions> = {}): Promise<LanemuxNode> {
    const transport = name === null ? this.#cuttable() : memoryTransport({ network: this.network, name });
    const n = await createNode({ transports: [transport], runtime: this.rt, ...options });
    this.nodes.push(n);
    return n;
  }

  /** Abort every connection the dialling nodes made (what was in flight is lost). */
  cut(): void {
    for (const c of this.#cuts) c();
  }

  /** A dialling memory adapter whose connections {@link cut} aborts. */
  #cuttable(): TransportAdapter {
    const conns: Connection[] = [];
    const inner = memoryTransport({ network: this.network, listen: false });
    this.#cuts.push(() => {
      for (const c of conns.splice(0))
        c.close(new TransportError('ERR_PEER_GONE', 'network cut', { retryable: true }), 'abort');
    });
    return {
      name: inner.name,
      dialSchemes: inner.dialSchemes,
      listen: (h) => inner.listen(h),
      dial: (r, e) =>
        inner.dial(r, {
          open: (c) => {
            conns.push(c);
            e.open(c);
          },
          fail: (x) => e.fail(x),
        }),
      close: () => inner.close(),
    };
  }

  /** Run macrotasks, the clock standing still, until `p` settles. */
  async drive<T>(p: Promise<T>): Promise<T> {
    const s = watch(p);
    for (let i = 0; i < 1_000 && !s.settled; i++) await this.rt.runMacrotasks();
    if (!s.settled) throw new Error('still pending while the manual clock stands still');
    return p;
  }

  /** Let the clock run 1 ms at a time until `p` settles (at most `limitMs`). */
  async tick<T>(p: Promise<T>, limitMs = 10_000): Promise<T> {
    const s = watch(p);
    for (let i = 0; i < limitMs && !s.settled; i++) await this.rt.advance(1);
    if (!s.settled) throw new Error(`still pending after ${limitMs} ms of the manual clock`);
    return p;
  }

  async closeAll(): Promise<void> {
    await this.drive(Promise.all(this.nodes.splice(0).map((n) => n.close())));
  }
}

/** Whether `p` has settled yet (its rejection is handled by whoever awaits `p`). */
export function watch(p: Promise<unknown>): { readonly settled: boolean } {
  const s = { settled: false };
  p.then(
    () => (s.settled = true),
    () => (s.settled = true),
  );
  return s;
}

/** Read an anchor to its end: its items, and the error that ended it (null: a clean end). */
export async function collect<T>(anchor: StreamAnchor<T>): Promise<{ items: T[]; error: unknown }> {
  const items: T[] = [];
  try {
    for await (const v of anchor) items.push(v);
    return { items, error: null };
  } catch (error) {
    return { items, error };
  }
}

/** Send `prefix0 … prefix(n-1)`, then finalize: null, or the error that stopped it. */
export async function produce(sender: StreamSender<string>, n: number, prefix = ''): Promise<unknown> {
  try {
    for (let i = 0; i < n; i++) await sender.send(`${prefix}${i}`);
    await sender.finalize();
    return null;
  } catch (e) {
    return e;
  }
}

export const numbered = (n: number, prefix = ''): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** A node's peer id (its worker id, 16 hex digits). */
export const peerIdOf = (n: LanemuxNode): string => n.workerId.toString(16).padStart(16, '0');
