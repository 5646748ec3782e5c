/**
 * Which peers a node's mux streams resume with (docs/protocol.md §8.3): both HELLOs list
 * {@link RESUME_KEY}. The consumer side asks it when a link is lost (keep the stream for the
 * producer's resume, or let it end), the producer's resume registry when it attaches; it is kept
 * apart from the registry so that a consumer-only client has it without the producer's replay rings.
 */
import type { Messenger, PeerId, PeerInfo } from '../messenger/types.ts';
import { RESUME_KEY } from './resume-options.ts';

export class ResumePeers {
  /** How long a lost stream waits for its resume, ms. */
  readonly windowMs: number;
  /** Called on every peer link after this table is updated (the producer's registry wakes its waiting streams). */
  onPeerUp: ((info: PeerInfo) => void) | null = null;
  readonly #messenger: Messenger;
  readonly #selfAdvertises: boolean;
  /** Peers whose latest HELLO listed the resume key (kept after their link is lost). */
  readonly #peers = new Set<PeerId>();
  readonly #unsubscribe: () => void;

  constructor(messenger: Messenger, windowMs: number) {
    this.windowMs = windowMs;
    this.#messenger = messenger;
    this.#selfAdvertises = messenger.self.transportKeys.includes(RESUME_KEY);
    for (const p of messenger.peers()) if (p.transportKeys.includes(RESUME_KEY)) this.#peers.add(p.id);
    this.#unsubscribe = messenger.onPeer((info) => {
      if (info.transportKeys.includes(RESUME_KEY)) this.#peers.add(info.id);
      else this.#peers.delete(info.id);
      this.onPeerUp?.(info);
    });
  }

  /** True when streams toward `peer` resume: both this node's and the peer's HELLO list the resume key. */
  negotiated(peer: PeerId): boolean {
    if (!this.#selfAdvertises) return false;
    const now = this.#messenger.peer(peer);
    return now === undefined ? this.#peers.has(peer) : now.transportKeys.includes(RESUME_KEY);
  }

  /** The node closed: no more peer events. */
  close(): void {
    this.#unsubscribe();
    this.onPeerUp = null;
  }
}
