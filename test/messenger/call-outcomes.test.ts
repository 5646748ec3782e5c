// What a call settles with: handlers throwing values with no string form are reported (ordered) or
// answered ERR_HANDLER_FAILED (unary), per-call timeouts are range-checked, and admissions waiting
// when the application disconnects reject with the link's reason (docs/protocol.md §6); handlers
// registered with `signal: false` are never handed one shared AbortSignal.
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { MessengerErrorEvent } from '../../src/messenger/types.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { waitFor } from '../support/wait-for.ts';
import { messengerFixture } from '../transport/raw-peer.ts';

const { open, tcpMessenger: tcpNode } = messengerFixture(afterEach);

describe('handlers throwing values without a string form', () => {
  const nasty = (): unknown => Object.create(null) as unknown;

  it('an ordered handler is reported through onError and the read path carries on', async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    const errors: MessengerErrorEvent[] = [];
    a.onError((e) => errors.push(e));
    let calls = 0;
    a.on('x', () => {
      calls++;
      throw nasty();
    });
    const pa = await b.connect(a.addresses[0]!);
    b.send(pa.id, 0, 'x', new Uint8Array(1));
    b.send(pa.id, 0, 'x', new Uint8Array(1));
    await waitFor(() => errors.length === 2, 5_000, 'two reported handler errors');
    expect(calls).toBe(2);
    expect(errors[0]!.handler).toBe('x');
    expect(errors[0]!.error.message).toBe('[object Object]');
    expect(a.stats().handlerErrors).toBe(2);
    expect(a.peers().length).toBe(1);
  });

  it('a unary handler throwing synchronously or rejecting answers ERR_HANDLER_FAILED', async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    const errors: MessengerErrorEvent[] = [];
    a.onError((e) => errors.push(e));
    a.handle('sync', () => {
      throw nasty();
    });
    a.handle('async', async () => {
      await Promise.resolve();
      throw nasty();
    });
    const pa = await b.connect(a.addresses[0]!);
    for (const name of ['sync', 'async']) {
      const err = await b.request(pa.id, name, null).then(
        () => undefined,
        (e: unknown) => e as { code: string; message: string },
      );
      expect(err?.code).toBe('ERR_HANDLER_FAILED');
      expect(err?.message).toContain('[object Object]');
    }
    expect(errors.map((e) => e.handler)).toEqual(['sync', 'async']);
    expect(await b.ping(pa.id)).toBeGreaterThanOrEqual(0);
  });
});

describe('per-call timeouts are range-checked', () => {
  it('request, ping and connect refuse timeoutMs outside 1..2^31-1 with ERR_INVALID_ARGUMENT', async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    a.handle('echo', (_from, body) => body);
    const pa = await b.connect(a.addresses[0]!);
    for (const bad of [0, -1, 0.5, 2 ** 31, Number.POSITIVE_INFINITY, Number.NaN, '100' as unknown as number]) {
      await expect(b.request(pa.id, 'echo', 1, { timeoutMs: bad }), `request ${bad}`).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      });
      await expect(b.ping(pa.id, { timeoutMs: bad }), `ping ${bad}`).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      });
      await expect(b.connect(a.addresses[0]!, { timeoutMs: bad }), `connect ${bad}`).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      });
    }
    // Before the check, 2^31 ms fired after 1 ms: the request timed out at once.
    expect(await b.request(pa.id, 'echo', 1, { timeoutMs: 2 ** 31 - 1 })).toBe(1);
    expect(await b.ping(pa.id, { timeoutMs: 1_000 })).toBeGreaterThanOrEqual(0);
    expect((await b.connect(a.addresses[0]!, { timeoutMs: 2 ** 31 - 1 })).id).toBe(a.self.id);
  });
});

describe('waiting admissions reject with the link reason (docs/protocol.md §6)', () => {
  it("waiting admissions reject with the link's reason: ERR_CLOSED when the application disconnects", async () => {
    const network = createMemoryNetwork();
    const a = await createMessenger({
      transports: [memoryTransport({ network, admissionLimit: 1024 })],
      healthCheck: false,
    });
    const b = await createMessenger({
      transports: [memoryTransport({ network, admissionLimit: 1024 })],
      healthCheck: false,
    });
    open.push(a, b);
    b.on('x', () => {});
    const peer = await a.connect(b.addresses[0]!);
    b.pause(a.self.id);
    const waits: Promise<string>[] = [];
    for (let i = 0; i < 20; i++) {
      const r = a.send(peer.id, 0, 'x', new Uint8Array(200));
      if (r !== true)
        waits.push(
          r.then(
            () => 'ok',
            (e: { code: string }) => e.code,
          ),
        );
    }
    expect(waits.length).toBeGreaterThan(0);
    const pending = a.request(peer.id, 'nobody', null).catch((e: { code: string }) => e.code);
    a.disconnect(peer.id, 'app says bye');
    expect(new Set(await Promise.all(waits))).toEqual(new Set(['ERR_CLOSED']));
    expect(await pending).toBe('ERR_CLOSED');
  });
});

describe('handle(name, fn, { signal: false })', () => {
  it('never hands handlers one shared AbortSignal, so abort listeners added per request cannot pile up', async () => {
    const network = createMemoryNetwork();
    const server = await createMessenger({ transports: [memoryTransport({ network })], healthCheck: false });
    const client = await createMessenger({ transports: [memoryTransport({ network })], healthCheck: false });
    open.push(server, client);
    const seen = new Set<AbortSignal>();
    // A handler written against RequestHandler (as plain JS, or before it was switched to signal:false)
    // that ties a per-request resource to the signal: with one process-wide signal every request's
    // listener (and whatever it closes over) stays reachable forever.
    const handler = (_from: string, body: unknown, signal?: AbortSignal): unknown => {
      if (signal !== undefined) {
        seen.add(signal);
        signal.addEventListener('abort', () => {});
      }
      return body;
    };
    server.handle('noSignal', handler, { signal: false });
    const peer = await client.connect(server.addresses[0] as string);
    for (let i = 0; i < 50; i++) expect(await client.request(peer.id, 'noSignal', i)).toBe(i);
    for (const s of seen) expect(getEventListeners(s, 'abort').length).toBeLessThanOrEqual(1);
  });
});
