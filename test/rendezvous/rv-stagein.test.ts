// Regression (review finding) for StageIn (receiver side of rendezvous) against an untrusted peer.
import { describe, expect, it } from 'vitest';
import { MAX_QUEUED_TRANSFERS, PULL_CHUNK_MAX, StageIn } from '../../src/mux/rendezvous.ts';
import type { StageInHost } from '../../src/mux/rendezvous.ts';
import { encodeOwned } from '../../src/wire/msgpack.ts';

const MiB = 1024 * 1024;
const flush = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

interface Req {
  id: number;
  offset?: number;
  release?: boolean;
}

function host(answer: (body: Req) => Promise<unknown>): { h: StageInHost; reqs: Req[]; refused: string[] } {
  const reqs: Req[] = [];
  const refused: string[] = [];
  const h: StageInHost = {
    request: (_p, _n, body) => {
      reqs.push(body as Req);
      return answer(body as Req);
    },
    maxMessageSize: () => 16 * MiB,
    deliver: () => {},
    refuse: (_p, _l, _e, _s, _x, msg) => refused.push(msg),
  };
  return { h, reqs, refused };
}

describe('StageIn against a hostile sender', () => {
  it('one transfer at a time per peer: a failed transfer must not leave pulls (and its buffer) alive while the next is allocated', async () => {
    // The peer answers the first chunk of every transfer with an error at once and never answers the others.
    const never = new Promise<unknown>(() => {});
    const { h, reqs } = host((b) => (b.offset === 0 ? Promise.reject(new Error('nope')) : never));
    let live = 0;
    let peak = 0;
    h.bytesChanged = (d) => {
      live += d;
    };
    const sin = new StageIn(h, 64 * MiB);
    const size = 4 * PULL_CHUNK_MAX; // 2 MiB: four chunks, one per pull worker
    for (let id = 1; id <= 8; id++) {
      sin.onDescriptor('peer', 0, encodeOwned({ id, size, mux_slot: `1:${id << 8}:${id}` }));
    }
    await flush();
    peak = Math.max(peak, live);
    // Transfers that still have pulls in flight (each such pull keeps its transfer's `size`-byte buffer alive).
    const pending = new Set(reqs.filter((r) => r.offset !== 0).map((r) => r.id));
    // Intended bound: at most one transfer assembling per peer. Observed: all 8 have pulls pending,
    // i.e. 8 x 2 MiB pinned (with stagedPayloadMax 64 MiB, 8 x 64 MiB), while the gauge says 0.
    expect(pending.size).toBeLessThanOrEqual(1);
  });

  it('refusals are bounded: a flood of oversize descriptors must not issue one release request each', async () => {
    const never = new Promise<unknown>(() => {});
    const { h, reqs } = host(() => never); // the peer never answers its releases (10 s timeout each)
    const sin = new StageIn(h, 1 * MiB);
    for (let id = 1; id <= 20_000; id++) {
      sin.onDescriptor('peer', 0, encodeOwned({ id, size: 2 * MiB, mux_slot: '1:256:1' }));
    }
    // Each one is a pending messenger request; maxPendingRequests (65,536) is node-wide, so one peer
    // can exhaust it and make every other request of the node (attach, other peers' pulls) fail ERR_BUSY.
    expect(reqs.length).toBeLessThanOrEqual(MAX_QUEUED_TRANSFERS);
  });
});
