// Regression (review finding): a WebTransport lane whose session dies between stream creation and start() is handed
// over already closed, and its receiver is never told (the dial hangs until the hello timeout, and a
// reconnecting dial never schedules its next attempt).
import { describe, expect, it } from 'vitest';
import { webTransportClientTransport, type WebTransportSession } from '../../src/adapters/webtransport.ts';
import type { Connection } from '../../src/transport/port.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';

function fakeCtor(hops: number) {
  return class FakeWt implements WebTransportSession {
    readonly ready = Promise.resolve();
    readonly closed: Promise<unknown>;
    #close!: () => void;
    constructor() {
      this.closed = new Promise((r) => (this.#close = () => r(undefined)));
    }
    close(): void {
      this.#close();
    }
    createBidirectionalStream() {
      const stream = { readable: new ReadableStream<Uint8Array>(), writable: new WritableStream<Uint8Array>() };
      // The peer closes the session a few microtasks after the stream opened.
      let n = hops;
      const tick = (): void => {
        if (n-- > 0) queueMicrotask(tick);
        else this.#close();
      };
      queueMicrotask(tick);
      return Promise.resolve(stream);
    }
  };
}

describe('webtransport client: session lost before start()', () => {
  it('every opened lane either fails the dial or reports closed to its receiver', async () => {
    const silent: number[] = [];
    for (let hops = 0; hops < 12; hops++) {
      for (const reconnect of [false, true]) {
        const adapter = webTransportClientTransport({
          WebTransport: fakeCtor(hops) as never,
          minReconnectionDelay: 1,
          reconnectionJitter: 0,
          maxRetries: 0,
        });
        let opened: Connection | undefined;
        let closedReported = false;
        let failed = false;
        adapter.dial(
          {
            address: 'https://x.test/lanemux',
            lane: 0,
            frameLimit: 4096,
            maxMessageSize: 1 << 20,
            reconnect,
            runtime: systemRuntime(),
          },
          {
            open(c) {
              opened ??= c;
              c.start({
                message() {},
                closed() {
                  closedReported = true;
                },
              });
            },
            fail() {
              failed = true;
            },
          },
        );
        await new Promise((r) => setTimeout(r, 20));
        if (opened !== undefined && !closedReported && !failed) silent.push(hops * 2 + (reconnect ? 1 : 0));
        await adapter.close();
      }
    }
    expect(silent).toEqual([]);
  });
});
