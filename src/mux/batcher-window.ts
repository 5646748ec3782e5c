/**
 * The peer window on a batcher (the sender's side; the account itself is `PeerEgress`, peer-egress.ts): which
 * link it counts, and the slots whose head record does not fit it. Those wait in a FIFO, woken
 * oldest first as releases make room. Functions over the batcher's state (see batcher.ts); the
 * per-record check `Batcher.windowed` stays on the hot path in batcher.ts.
 */
import { WakeSource } from '../metrics/mux-metrics.ts';
import type { Batcher } from './batcher.ts';
import { EMIT_WINDOW, windowBytes } from './egress-record.ts';
import type { EgressSlot } from './egress-slot.ts';

/** Put the peer window on this batcher's link (a newer link resets it; an older one leaves this batcher uncounted). */
export function syncWindow(b: Batcher): void {
  b.windowEpoch = b.linkEpoch ?? 0;
  b.peerEgress.sync(b.windowEpoch, b.host.sendWindow?.(b.peer) ?? Number.POSITIVE_INFINITY);
}

/** `slot`'s head record does not fit the peer window: it waits in the queue (EMIT_WINDOW). */
export function windowBlock(b: Batcher, slot: EgressSlot): number {
  if (!slot.windowBlocked) {
    slot.windowBlocked = true;
    b.windowBlocked.push(slot);
    b.host.metrics.sendWindowBlocked++;
  }
  if (!b.windowWaiting) {
    b.windowWaiting = true;
    b.peerEgress.whenRoom(b.onWindowRoom);
  }
  return EMIT_WINDOW;
}

/**
 * The peer released window: wake the blocked slots, oldest first, as long as their head records
 * would fit (so a small release wakes a few slots, not all of them); the rest keep waiting.
 */
export function windowRoom(b: Batcher): void {
  b.windowWaiting = false;
  if (b.retired) return;
  const pe = b.peerEgress;
  const list = b.windowBlocked;
  const size = pe.sendWindow.size;
  let inflight = pe.sendWindow.inflight;
  let i = b.windowHead;
  let woke = false;
  for (; i < list.length; i++) {
    const s = list[i]!;
    if (!s.windowBlocked || s.closed || s.queued === 0) {
      s.windowBlocked = false;
      continue;
    }
    const bytes = windowBytes(s.qKind[s.qHead]!, s.qValue[s.qHead], b.cap);
    if (inflight !== 0 && inflight + bytes > size) break;
    inflight += bytes;
    s.windowBlocked = false;
    b.markReady(s);
    woke = true;
  }
  if (i === list.length) {
    list.length = 0;
    i = 0;
  } else if (i > 1024 && i * 2 > list.length) {
    list.splice(0, i);
    i = 0;
  }
  b.windowHead = i;
  if (i < list.length) {
    b.windowWaiting = true;
    pe.whenRoom(b.onWindowRoom);
  }
  if (woke) b.wake(WakeSource.control);
}

/** Forget the blocked slots (epoch death, retirement): a registered wake-up then finds none. */
export function clearWindowBlocked(b: Batcher): void {
  b.windowBlocked = [];
  b.windowHead = 0;
}
