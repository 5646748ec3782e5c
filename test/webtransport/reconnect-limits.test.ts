// The WebTransport client's reconnecting dial, on a scripted WebTransport (no network): the hashes
// function is called before every session and each session gets what it returned then; the dial
// gives up after maxSameFailures failures of one kind (not after failures of changing kinds); a
// function that returns something that is not a hash list fails the dial at once with ERR_INVALID_CONFIG.
import { describe, expect, it } from 'vitest';
import type { LanemuxError } from '../../src/errors.ts';
import type { DialRequest } from '../../src/transport/port.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import {
  webTransportClientTransport,
  type WebTransportClientTransportOptions,
  type WebTransportHash,
  type WebTransportInit,
  type WebTransportSession,
} from '../../src/adapters/webtransport.ts';
import type { WtBidiStream } from '../../src/adapters/webtransport-stream.ts';

const REQUEST: DialRequest = {
  address: 'https://127.0.0.1:4433/lanemux',
  lane: 0,
  frameLimit: 4096,
  maxMessageSize: 1 << 20,
  reconnect: true,
  runtime: systemRuntime(),
};
const FAST = { minReconnectionDelay: 1, reconnectionJitter: 0, maxReconnectionDelay: 2 };
const hash = (byte: number): WebTransportHash => ({ algorithm: 'sha-256', value: new Uint8Array(32).fill(byte) });

/**
 * A WebTransport whose n-th session (0-based) fails with `outcomes[n]` (a message) or, for
 * `'ok'`, becomes ready with a stream that never carries a byte. Records each session's options.
 */
function scripted(outcomes: readonly string[]) {
  const seen: (WebTransportInit | undefined)[] = [];
  class Scripted implements WebTransportSession {
    readonly ready: Promise<unknown>;
    readonly closed: Promise<unknown>;
    constructor(_url: string, init?: WebTransportInit) {
      const outcome = outcomes[seen.length] ?? 'ok';
      seen.push(init);
      this.ready = outcome === 'ok' ? Promise.resolve() : Promise.reject(new Error(outcome));
      this.closed = outcome === 'ok' ? new Promise(() => {}) : Promise.reject(new Error(outcome));
      this.ready.catch(() => {});
      this.closed.catch(() => {});
    }
    createBidirectionalStream(): Promise<WtBidiStream> {
      return Promise.resolve({
        readable: new ReadableStream<Uint8Array>(),
        writable: new WritableStream<Uint8Array>(),
      });
    }
    close(): void {}
  }
  return { ctor: Scripted, seen };
}

/** Dial once with reconnect on; resolves with the first event: opened, or the failure. */
function dialOnce(
  options: WebTransportClientTransportOptions,
): Promise<{ opened: boolean; error?: LanemuxError; close(): Promise<void> }> {
  const adapter = webTransportClientTransport(options);
  return new Promise((resolve) => {
    const handle = adapter.dial(REQUEST, {
      open: () =>
        resolve({
          opened: true,
          close: async () => {
            handle.close();
            await adapter.close();
          },
        }),
      fail: (error) => resolve({ opened: false, error, close: () => adapter.close() }),
    });
  });
}

describe('webtransport client: serverCertificateHashes as a function', () => {
  it('is called before every session, and each attempt uses what it returned at that moment', async () => {
    const { ctor, seen } = scripted(['handshake failed', 'handshake failed', 'ok']);
    let n = 0;
    const r = await dialOnce({ WebTransport: ctor, ...FAST, serverCertificateHashes: async () => [hash(++n)] });
    expect(r.opened).toBe(true);
    expect(seen.map((init) => (init?.serverCertificateHashes?.[0]?.value as Uint8Array | undefined)?.[0])).toEqual([
      1, 2, 3,
    ]);
    await r.close();
  });

  it('one that throws fails only that attempt; the next attempt calls it again', async () => {
    const { ctor, seen } = scripted([]);
    let calls = 0;
    const r = await dialOnce({
      WebTransport: ctor,
      ...FAST,
      serverCertificateHashes: () => {
        if (++calls === 1) throw new Error('engine.json unreachable');
        return [hash(7)];
      },
    });
    expect(r.opened).toBe(true);
    expect(calls).toBe(2);
    expect(seen).toHaveLength(1);
    await r.close();
  });

  it('one that returns something other than a hash list fails the dial at once with ERR_INVALID_CONFIG, opening no session', async () => {
    const { ctor, seen } = scripted([]);
    const r = await dialOnce({ WebTransport: ctor, ...FAST, serverCertificateHashes: (() => 'deadbeef') as never });
    expect(r.opened).toBe(false);
    expect(r.error?.code).toBe('ERR_INVALID_CONFIG');
    expect(r.error?.message).toContain('serverCertificateHashes() must return');
    expect(seen).toHaveLength(0);
    await r.close();
  });

  it('a value that is neither a list nor a function is refused when the adapter is made', () => {
    expect(() =>
      webTransportClientTransport({ WebTransport: scripted([]).ctor, serverCertificateHashes: 'x' as never }),
    ).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }));
    expect(() => webTransportClientTransport({ WebTransport: scripted([]).ctor, maxSameFailures: 0 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    );
  });
});

describe('webtransport client: a reconnecting dial gives up on repeated failures', () => {
  it('after maxSameFailures (default 5) failures of one kind: ERR_CONNECT saying how many and why', async () => {
    // Chromium's one message for every failed handshake (certificate refused, nothing listening).
    const { ctor, seen } = scripted(Array.from({ length: 20 }, () => 'WebTransportError: Opening handshake failed.'));
    const r = await dialOnce({ WebTransport: ctor, ...FAST });
    expect(r.opened).toBe(false);
    expect(seen).toHaveLength(5);
    expect(r.error?.code).toBe('ERR_CONNECT');
    expect(r.error?.message).toBe(
      'webtransport to https://127.0.0.1:4433/lanemux: 5 consecutive attempts failed the same way (WebTransportError: Opening handshake failed.); giving up',
    );
    await r.close();
  });

  it('failures whose kind keeps changing do not add up: only a run of one kind ends the dial', async () => {
    const { ctor, seen } = scripted([
      'refused 1',
      'reset',
      'refused 2',
      'reset',
      'timed out',
      'timed out',
      'timed out',
    ]);
    const r = await dialOnce({ WebTransport: ctor, ...FAST, maxSameFailures: 2 });
    expect(r.opened).toBe(false);
    // "refused 1" and "refused 2" are one kind (digits aside) but never in a row; the timeouts are.
    expect(seen).toHaveLength(6);
    expect(r.error?.message).toContain('2 consecutive attempts failed the same way (timed out)');
    await r.close();
  });

  it('a certificate the runtime names as refused ends a dial with fixed hashes at once, not retryable', async () => {
    const { ctor, seen } = scripted([
      'the cryptographic handshake failed: error 48: invalid peer certificate: UnknownIssuer',
    ]);
    const r = await dialOnce({ WebTransport: ctor, ...FAST, serverCertificateHashes: [hash(1)] });
    expect(r.opened).toBe(false);
    expect(seen).toHaveLength(1);
    expect(r.error).toMatchObject({ code: 'ERR_CONNECT', retryable: false });
    expect(r.error?.message).toContain(
      "the server's certificate is not accepted (the cryptographic handshake failed: error 48: invalid peer certificate: UnknownIssuer)",
    );
    await r.close();
  });
});
