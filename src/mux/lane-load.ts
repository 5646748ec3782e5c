/**
 * Lane load of a node's mux, for placing unkeyed streams on the least-loaded lane (docs/protocol.md
 * §10.6): per peer, the binds answered to it plus its live slots; per node, every live slot plus
 * unclaimed pre-binds (the pre-bind choice).
 */
import type { PeerId } from '../messenger/types.ts';
import { MAX_LANES } from '../wire/constants.ts';

export class LaneLoad {
  /** Load by lane toward each peer (made on first use). */
  readonly #peers = new Map<PeerId, Int32Array>();
  /** Load by lane of the whole node. */
  readonly node = new Int32Array(MAX_LANES);

  /** The peer's load by lane (made on first use). */
  of(peer: PeerId): Int32Array {
    let l = this.#peers.get(peer);
    if (!l) {
      l = new Int32Array(MAX_LANES);
      this.#peers.set(peer, l);
    }
    return l;
  }

  /** The peer's load by lane, if it has any. */
  peek(peer: PeerId): Int32Array | undefined {
    return this.#peers.get(peer);
  }

  /** The peer is gone: forget its load. */
  forget(peer: PeerId): void {
    this.#peers.delete(peer);
  }
}

/** The least-loaded of the first `lanes` lanes of `load`, ties to the lowest. */
export function leastLoaded(load: Int32Array, lanes: number): number {
  let best = 0;
  for (let l = 1; l < lanes; l++) if (load[l]! < load[best]!) best = l;
  return best;
}
