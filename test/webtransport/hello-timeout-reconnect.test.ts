// Regression (review finding): a hello that timed out on a reconnecting dial used ERR_HANDSHAKE, a code
// after which a dial never retries, so one slow server start ended reconnects for good. The timeout is
// marked retryable and a reconnecting dial tries again (other handshake errors stay terminal).
import { describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import { webTransportClientTransport, type WebTransportSession } from '../../src/adapters/webtransport.ts';

/** A WebTransport whose sessions open streams that never carry a byte (no HELLO ever arrives). */
function silentCtor(created: { n: number }) {
  return class SilentWt implements WebTransportSession {
    readonly ready = Promise.resolve();
    readonly closed: Promise<unknown>;
    #close!: () => void;
    constructor() {
      created.n++;
      this.closed = new Promise((r) => (this.#close = () => r(undefined)));
    }
    close(): void {
      this.#close();
    }
    createBidirectionalStream() {
      return Promise.resolve({
        readable: new ReadableStream<Uint8Array>(),
        writable: new WritableStream<Uint8Array>(),
      });
    }
  };
}

describe('webtransport client: a hello timeout on a reconnecting dial', () => {
  it('redials after the timeout instead of giving up (reconnect on), and gives up with reconnect off', async () => {
    for (const reconnect of [true, false]) {
      const created = { n: 0 };
      const m = await createMessenger({
        transports: [
          webTransportClientTransport({
            WebTransport: silentCtor(created) as never,
            minReconnectionDelay: 1,
            reconnectionJitter: 0,
            maxReconnectionDelay: 5,
          }),
        ],
        helloTimeoutMs: 50,
        reconnect,
        healthCheck: false,
      });
      const connecting = m.connect('https://x.test/lanemux', { timeoutMs: 600 }).then(
        () => 'connected',
        (e: { code?: string }) => e.code ?? 'error',
      );
      const outcome = await connecting;
      expect(outcome).not.toBe('connected');
      if (reconnect) expect(created.n).toBeGreaterThanOrEqual(3);
      else expect(created.n).toBe(1);
      await m.close();
    }
  });
});
