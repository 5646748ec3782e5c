// The node's wait for a peer whose link is coming back (what an attach or a ticket open toward a
// reconnecting peer uses): it resolves once the peer is back, is bounded and abortable, and speaks
// stream error codes. Memory transport on a manual clock.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { StreamError } from '../../src/stream/errors.ts';
import { waitForPeer } from '../../src/stream/peer-wait.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type { Connection, TransportAdapter } from '../../src/transport/port.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

let rt = new ManualRuntime();
const open: Messenger[] = [];
afterEach(async () => {
  await drive(Promise.all(open.splice(0).map((m) => m.close())));
  rt = new ManualRuntime();
});

async function drive<T>(p: Promise<T>): Promise<T> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 1_000 && !settled; i++) await rt.runMacrotasks();
  if (!settled) throw new Error('still pending while the manual clock stands still');
  return p;
}

/** A client whose dialled connections can be cut, and a server at memory://server. */
async function pair() {
  const network = createMemoryNetwork();
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
  const server = await createMessenger({
    transports: [memoryTransport({ network, name: 'server' })],
    healthCheck: false,
    runtime: rt,
  });
  const client = await createMessenger({ transports: [adapter], healthCheck: false, runtime: rt });
  open.push(server, client);
  const cut = (): void => {
    for (const c of conns.splice(0)) c.close(new TransportError('ERR_PEER_GONE', 'cut', { retryable: true }), 'abort');
  };
  return { server, client, cut };
}

describe('waitForPeer: an operation toward a reconnecting peer waits for it', () => {
  it('resolves at once for a connected peer, and after the re-dial for one whose link was cut', async () => {
    const { client, cut } = await pair();
    const peer = await drive(client.connect('memory://server', { reconnect: { initialDelayMs: 1_000, jitterMs: 0 } }));
    await expect(waitForPeer(client, peer.id)).resolves.toBe(peer.id);
    cut();
    await rt.runMacrotasks();
    expect(client.peer(peer.id), 'the link is down').toBeUndefined();
    const waiting = waitForPeer(client, peer.id);
    await rt.advance(1_000);
    await expect(drive(waiting)).resolves.toBe(peer.id);
  });

  it('rejects a StreamError ERR_UNKNOWN_PEER for a peer never seen, and when the peer does not come back in time', async () => {
    const { client, cut } = await pair();
    const unknown = waitForPeer(client, '00000000000000aa');
    await expect(unknown).rejects.toBeInstanceOf(StreamError);
    await expect(unknown).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER' });
    const peer = await drive(client.connect('memory://server', { reconnect: { initialDelayMs: 60_000, jitterMs: 0 } }));
    cut();
    await rt.runMacrotasks();
    const late = waitForPeer(client, peer.id, { timeoutMs: 5_000 });
    await rt.advance(5_000);
    await expect(drive(late)).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER', retryable: true });
    await expect(late).rejects.toBeInstanceOf(StreamError);
  });

  it('is abortable with the operation’s signal (a StreamError ERR_ABORTED)', async () => {
    const { client, cut } = await pair();
    const peer = await drive(client.connect('memory://server', { reconnect: true }));
    cut();
    await rt.runMacrotasks();
    const ac = new AbortController();
    const waiting = waitForPeer(client, peer.id, { signal: ac.signal });
    ac.abort();
    await expect(drive(waiting)).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await expect(waiting).rejects.toBeInstanceOf(StreamError);
  });

  it('a messenger without the lifecycle (a test double) keeps the old answer: ERR_UNKNOWN_PEER at once', async () => {
    const { client } = await pair();
    const bare = { peer: client.peer.bind(client) } as unknown as Messenger;
    await expect(waitForPeer(bare, '00000000000000aa')).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER' });
  });
});
