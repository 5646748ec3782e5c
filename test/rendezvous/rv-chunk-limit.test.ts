// The pull chunk limit is docs/protocol.md §8.1's `min(512 KiB, max message size − 1 KiB)` on both
// sides: toward a 4,096-byte peer a 3,072-byte pull is served (it used to be refused as "chunk limit 3071").
import { describe, expect, it } from 'vitest';
import { PULL_CHUNK_MAX, StageOut, pullChunkLimit } from '../../src/mux/rendezvous.ts';

describe('rendezvous pull chunk limit', () => {
  // The messenger reports the payload a batch may carry: the link's max message size less its 1-byte envelope.
  const payloadToward4k = 4096 - 1;

  it('a 3,072-byte pull toward a peer whose max message size is 4,096 bytes is served; 3,073 is refused', () => {
    const out = new StageOut(
      { now: () => 0, send: () => true, maxMessageSize: () => payloadToward4k },
      1 << 24,
      60_000,
    );
    const { id } = out.stage('peer', 0, new Uint8Array(10_000), '1:256:1');
    expect(() => out.onPull('peer', { id, offset: 0, length: 3072 })).not.toThrow();
    expect(() => out.onPull('peer', { id, offset: 3072, length: 3073 })).toThrow(/chunk limit 3072/);
  });

  it('the limit the receiver pulls with is the one the sender serves: max message size − 1 KiB, at most 512 KiB, at least 1 KiB', () => {
    expect(pullChunkLimit(payloadToward4k)).toBe(3072);
    expect(pullChunkLimit(65_536 - 1)).toBe(65_536 - 1024);
    expect(pullChunkLimit(64 * 1024 * 1024)).toBe(PULL_CHUNK_MAX);
    expect(pullChunkLimit(255)).toBe(1024);
  });
});
