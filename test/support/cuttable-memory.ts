// A memory adapter whose dialled connections the test can cut (aborted: what was in flight is lost),
// for the suites that lose links on purpose (resume, re-attach, relay).
import { type createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type { Connection, TransportAdapter } from '../../src/transport/port.ts';

/** A dialling memory adapter on `network`, and `cut()`, which aborts every connection it opened so far. */
export function cuttable(
  network: ReturnType<typeof createMemoryNetwork>,
  why = 'network cut',
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
          e.open(c);
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
