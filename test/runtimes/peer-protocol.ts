// The cross-runtime test peer, runtime-agnostic (imports only src/): a lanemux node plus a few
// messenger handlers through which another process drives streams both ways. The same code runs in
// the Node test process and in the Deno and Bun peer processes (`deno/peer.ts`, `bun/peer.ts`).
//
// Handlers (messenger requests):
// - `make-anchors {count}` → `{id, handles}`: create anchors and start reading them.
// - `read-anchors {id}` → `string[][]`: what those anchors read, once every stream has finished.
// - `produce {handles, tokens}`: attach to the handles and stream `tokens` tokens into each.
// - `pair {address, count, tokens}` → {@link Exchange}: from a fresh node (a new worker, so no link
//   of the test collides with another), dial `address` and run {@link exchange} with it.
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { TransportAdapter } from '../../src/transport/port.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/index.ts';
import { readAll } from '../support/read-all.ts';

/** A node and the messenger it rides on (requests go through the messenger). */
export interface Peer {
  readonly node: LanemuxNode;
  readonly messenger: Messenger;
  close(): Promise<void>;
}

/** What each side of an exchange read, stream by stream. */
export interface Exchange {
  /** Streams produced by the dialler, read by the listener. */
  readonly toListener: string[][];
  /** Streams produced by the listener, read by the dialler. */
  readonly toDialler: string[][];
  /** Runtime of the listener (`node`, `deno`, `bun`), as it reports itself. */
  readonly listener: string;
  /** Runtime of the dialler. */
  readonly dialler: string;
}

/** Which runtime this code runs in. */
export function runtimeName(): string {
  const g = globalThis as { Deno?: unknown; Bun?: unknown };
  if (g.Deno !== undefined) return 'deno';
  if (g.Bun !== undefined) return 'bun';
  return 'node';
}

/** Token `k` of stream `i`: ASCII and multi-byte UTF-8, so a codec slip shows. */
export function token(i: number, k: number): string {
  return `${i}:${k}:é✓${'x'.repeat(k % 7)}`;
}

/** The streams an exchange of `count` streams × `tokens` tokens must deliver. */
export function expectedStreams(count: number, tokens: number): string[][] {
  return Array.from({ length: count }, (_, i) => Array.from({ length: tokens }, (_, k) => token(i, k)));
}

/**
 * A node over `transports` (4 lanes). With `dialers` it serves the handlers above; `pair` dials
 * from a fresh node over `dialers()` (dial-only adapters of this runtime).
 */
export async function startPeer(transports: TransportAdapter[], dialers?: () => TransportAdapter[]): Promise<Peer> {
  const messenger = await createMessenger({
    transports,
    transportKeys: [MESSENGER_MUX_KEY],
    healthCheck: false,
    lanes: 4,
  });
  const node = await createNode({ messenger });
  const peer: Peer = {
    node,
    messenger,
    async close() {
      await node.close();
      await messenger.close();
    },
  };
  if (dialers !== undefined) serveProtocol(peer, dialers);
  return peer;
}

/** Attach to `handles` and stream `tokens` tokens into each, in lock step, then finalize. */
export async function produce(node: LanemuxNode, handles: readonly string[], tokens: number): Promise<void> {
  const senders = await Promise.all(handles.map((h) => node.attachAnchor<string>(h)));
  for (let k = 0; k < tokens; k++) await Promise.all(senders.map((s, i) => s.send(token(i, k))));
  await Promise.all(senders.map((s) => s.finalize()));
}

/** Create `count` anchors on `node` and read them; resolves with what they read. */
export function consume(node: LanemuxNode, count: number): { handles: string[]; read: Promise<string[][]> } {
  const anchors = Array.from({ length: count }, () => node.createAnchor<string>());
  return { handles: anchors.map((a) => a.handle), read: Promise.all(anchors.map((a) => readAll(a))) };
}

/** Stream both ways between `self` (the dialler) and `peerId` (serving the protocol). */
export async function exchange(self: Peer, peerId: string, count: number, tokens: number): Promise<Exchange> {
  const theirs = (await self.messenger.request(peerId, 'make-anchors', { count })) as {
    id: number;
    handles: string[];
    runtime: string;
  };
  await produce(self.node, theirs.handles, tokens);
  const toListener = (await self.messenger.request(peerId, 'read-anchors', { id: theirs.id })) as string[][];
  const ours = consume(self.node, count);
  await self.messenger.request(peerId, 'produce', { handles: ours.handles, tokens });
  const toDialler = await ours.read;
  return { toListener, toDialler, listener: theirs.runtime, dialler: runtimeName() };
}

function serveProtocol(peer: Peer, dialers: () => TransportAdapter[]): void {
  const reads = new Map<number, Promise<string[][]>>();
  let nextId = 0;
  const { messenger, node } = peer;
  messenger.handle('make-anchors', (_from, body) => {
    const { count } = body as { count: number };
    const id = ++nextId;
    const { handles, read } = consume(node, count);
    // A stream that fails rejects read-anchors; keep the rejection handled until then.
    read.catch(() => {});
    reads.set(id, read);
    return { id, handles, runtime: runtimeName() };
  });
  messenger.handle('read-anchors', async (_from, body) => {
    const { id } = body as { id: number };
    const read = reads.get(id);
    reads.delete(id);
    if (read === undefined) throw new Error(`no anchors with id ${id}`);
    return await read;
  });
  messenger.handle('produce', async (_from, body) => {
    const { handles, tokens } = body as { handles: string[]; tokens: number };
    await produce(node, handles, tokens);
    return true;
  });
  messenger.handle('pair', async (_from, body) => {
    const { address, count, tokens } = body as { address: string; count: number; tokens: number };
    const fresh = await startPeer(dialers());
    try {
      const id = await fresh.node.connect(address);
      return await exchange(fresh, id, count, tokens);
    } finally {
      await fresh.close();
    }
  });
}
