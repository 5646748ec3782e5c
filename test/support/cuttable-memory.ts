// A memory adapter whose dialled connections the test can cut (aborted: what was in flight is lost),
// for the suites that lose links on purpose (resume, re-attach, relay).
import { type createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type { Connection, TransportAdapter } from '../../src/transport/port.ts';

/**
 * Cut at one exact message: each hook sees a message of the dialled side (its first byte is the
 * envelope kind, docs/protocol.md §4) and returns true to lose it and cut every connection there.
 */
export interface CutTrap {
  /** A message the dialled side is about to receive. */
  inbound?(bytes: Uint8Array): boolean;
  /** A message the dialled side is about to send (`head`, then `body` if any). */
  outbound?(head: Uint8Array, body: Uint8Array | undefined): boolean;
  /** A message the dialled side is about to receive: true loses it and keeps the link (a peer that never answers). */
  swallow?(bytes: Uint8Array): boolean;
}

/**
 * A trap that loses the next message of envelope `kind` the dialled side receives (`inbound`) or
 * sends (`outbound`), once `state.armed` is set, cutting the link there; `state.fired` counts it.
 */
export function loseNext(
  kind: number,
  direction: 'inbound' | 'outbound',
): {
  state: { armed: boolean; fired: number };
  trap: CutTrap;
} {
  const state = { armed: false, fired: 0 };
  const hit = (b: Uint8Array): boolean => {
    if (!state.armed || b[0] !== kind) return false;
    state.armed = false;
    state.fired++;
    return true;
  };
  const trap: CutTrap = direction === 'inbound' ? { inbound: hit } : { outbound: (head) => hit(head) };
  return { state, trap };
}

/** A dialling memory adapter on `network`, and `cut()`, which aborts every connection it opened so far. */
export function cuttable(
  network: ReturnType<typeof createMemoryNetwork>,
  why = 'network cut',
  trap?: CutTrap,
): { adapter: TransportAdapter; cut: () => void } {
  const conns: Connection[] = [];
  const inner = memoryTransport({ network, listen: false });
  const adapter: TransportAdapter = {
    name: inner.name,
    dialSchemes: inner.dialSchemes,
    listen: (h) => inner.listen(h),
    dial: (r, e) =>
      inner.dial(r, {
        open: (c) => {
          conns.push(c);
          e.open(trap === undefined ? c : trapped(c, trap, () => cut()));
        },
        fail: (x) => e.fail(x),
      }),
    close: () => inner.close(),
  };
  const cut = (): void => {
    for (const c of conns.splice(0)) c.close(new TransportError('ERR_PEER_GONE', why, { retryable: true }), 'abort');
  };
  return { adapter, cut };
}

/** `c` with `trap` between it and its user: a trapped message is lost, and the link cut. */
function trapped(c: Connection, trap: CutTrap, cut: () => void): Connection {
  return {
    remote: c.remote,
    request: c.request,
    start: (receiver) =>
      c.start({
        message: (bytes) => {
          if (trap.inbound?.(bytes) === true) cut();
          else if (trap.swallow?.(bytes) !== true) receiver.message(bytes);
        },
        closed: (error) => receiver.closed(error),
      }),
    setFrameLimit: (bytes) => c.setFrameLimit(bytes),
    send: (head, body) => {
      if (trap.outbound?.(head, body) !== true) return c.send(head, body);
      // Lost on the way: the sender learns of the cut after its send, as from a real network.
      queueMicrotask(cut);
      return true;
    },
    bufferedAmount: () => c.bufferedAmount(),
    pause: () => c.pause(),
    resume: () => c.resume(),
    close: (reason, mode) => c.close(reason, mode),
  };
}
