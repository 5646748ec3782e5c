// Small test helpers shared by the transport and messenger suites (no sleeps where an event exists).
import type { Messenger, PeerGoneEvent, PeerInfo } from '../../src/messenger/types.ts';

/** The next onPeer event of `m` (optionally matching). */
export function nextPeer(m: Messenger, match: (p: PeerInfo) => boolean = () => true): Promise<PeerInfo> {
  return new Promise((resolve) => {
    const off = m.onPeer((p) => {
      if (!match(p)) return;
      off();
      resolve(p);
    });
  });
}

/** The next onPeerGone event of `m` (optionally matching). */
export function nextGone(m: Messenger, match: (e: PeerGoneEvent) => boolean = () => true): Promise<PeerGoneEvent> {
  return new Promise((resolve) => {
    const off = m.onPeerGone((e) => {
      if (!match(e)) return;
      off();
      resolve(e);
    });
  });
}

/** Reject if `p` does not settle within `ms` (keeps a hanging test from eating the whole timeout). */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Whether a promise has settled yet (checked after a macrotask turn). */
export async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await new Promise((r) => setTimeout(r, 0));
  return settled;
}

/** A payload whose bytes encode (tag, seq) so order and integrity can be checked. */
export function tagged(size: number, tag: number, seq: number): Uint8Array {
  const b = new Uint8Array(size);
  const v = new DataView(b.buffer);
  if (size >= 8) {
    v.setUint32(0, tag);
    v.setUint32(4, seq);
  }
  for (let i = 8; i < size; i++) b[i] = (seq + i) & 0xff;
  return b;
}

export function readTag(b: Uint8Array): { tag: number; seq: number } {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return { tag: v.getUint32(0), seq: v.getUint32(4) };
}

/** Check the filler bytes of a tagged payload. */
export function intact(b: Uint8Array): boolean {
  const { seq } = readTag(b);
  for (let i = 8; i < b.byteLength; i++) if (b[i] !== ((seq + i) & 0xff)) return false;
  return true;
}
