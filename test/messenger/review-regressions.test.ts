// Regressions for the second transport/messenger review: hostile MessagePack bodies over a real
// messenger, handlers throwing values with no string form, and per-call timeout range checks.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { MessengerErrorEvent } from '../../src/messenger/types.ts';
import { decodeBounded } from '../../src/wire/msgpack.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/transport/memory.ts';
import { waitFor, within } from '../transport/helpers.ts';
import { messengerFixture, rawPeer } from '../transport/raw-peer.ts';

const { open, sockets, tcpMessenger: tcpNode } = messengerFixture(afterEach);

/**
 * `size` bytes of nested containers, each header declaring `declared` items: array16 (`dc`) or map16
 * (`de`, each with a fixint key before the next map). Unchecked, the decoder reserved ~40,000× this.
 */
function bomb(size: number, kind: 'array16' | 'map16', declared = 16_000): Uint8Array {
  const unit = kind === 'array16' ? [0xdc, declared >> 8, declared & 0xff] : [0xde, declared >> 8, declared & 0xff, 0x01];
  const b = new Uint8Array(size);
  for (let i = 0; i + unit.length <= size; i += unit.length) b.set(unit, i);
  return b;
}

function withKind(kind: number, head: number[], body: Uint8Array): Uint8Array {
  const out = new Uint8Array(1 + head.length + body.byteLength);
  out[0] = kind;
  out.set(head, 1);
  out.set(body, 1 + head.length);
  return out;
}

describe('MessagePack container bombs over a real messenger (review 2, item 1)', () => {
  for (const shape of ['array16', 'map16'] as const) {
    it(`a ${shape} REQUEST bomb gets an error reply, a NOTICE bomb closes the link; other peers carry on`, async () => {
      const a = await tcpNode();
      const b = await tcpNode({}, false);
      a.handle('echo', (_from, body) => body);
      const pa = await b.connect(a.addresses[0]!);
      const raw = await rawPeer(a.addresses[0]!, sockets, { worker: 'feedfeedfeedfeed' });
      await waitFor(() => raw.frames.length >= 1 && a.peers().length === 2, 5_000, 'the raw peer to be established');
      const heapBefore = process.memoryUsage().heapUsed;

      // REQUEST: [0x03][u32 id = 7][u8 4]["echo"][bomb]
      const t0 = performance.now();
      raw.send(withKind(0x03, [0, 0, 0, 7, 4, 0x65, 0x63, 0x68, 0x6f], bomb(256 * 1024, shape)));
      await waitFor(() => raw.frames.length >= 2, 5_000, 'the error reply');
      const reply = raw.frames[1]!;
      expect(reply[0]).toBe(0x05);
      expect(Array.from(reply.subarray(1, 5))).toEqual([0, 0, 0, 7]);
      const body = decodeBounded(reply.subarray(5)) as { code: string; message: string };
      expect(body.code).toBe('ERR_MALFORMED_ENVELOPE');
      expect(body.message).toMatch(/MessagePack container declares \d+ items/);

      // NOTICE: [0x09][bomb] — the link is closed as malformed.
      raw.send(withKind(0x09, [], bomb(256 * 1024, shape)));
      await within(raw.closed, 5_000, 'the raw peer being disconnected');
      expect(performance.now() - t0).toBeLessThan(3_000);
      // Unchecked, this reserved gigabytes (heap OOM); checked, nothing sizeable is allocated.
      expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(64 * 1024 * 1024);

      // The well-behaved peer is untouched.
      expect(await b.request(pa.id, 'echo', { ok: 1 })).toEqual({ ok: 1 });
      expect(a.peers().map((p) => p.id)).toEqual([b.self.id]);
    });
  }
});

describe('handlers throwing values without a string form (review 2, item 3)', () => {
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

describe('per-call timeouts are range-checked (review 2, item 10)', () => {
  it('request, ping and connect refuse timeoutMs outside 1..2^31-1 with ERR_INVALID_ARGUMENT', async () => {
    const a = await tcpNode();
    const b = await tcpNode({}, false);
    a.handle('echo', (_from, body) => body);
    const pa = await b.connect(a.addresses[0]!);
    for (const bad of [0, -1, 0.5, 2 ** 31, Number.POSITIVE_INFINITY, Number.NaN, '100' as unknown as number]) {
      await expect(b.request(pa.id, 'echo', 1, { timeoutMs: bad }), `request ${bad}`).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
      await expect(b.ping(pa.id, { timeoutMs: bad }), `ping ${bad}`).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
      await expect(b.connect(a.addresses[0]!, { timeoutMs: bad }), `connect ${bad}`).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    }
    // Before the check, 2^31 ms fired after 1 ms: the request timed out at once.
    expect(await b.request(pa.id, 'echo', 1, { timeoutMs: 2 ** 31 - 1 })).toBe(1);
    expect(await b.ping(pa.id, { timeoutMs: 1_000 })).toBeGreaterThanOrEqual(0);
    expect((await b.connect(a.addresses[0]!, { timeoutMs: 2 ** 31 - 1 })).id).toBe(a.self.id);
  });
});

describe('documented rejection codes (review 2, item 11: protocol.md §6)', () => {
  it("waiting admissions reject with the link's reason: ERR_CLOSED when the application disconnects", async () => {
    const network = createMemoryNetwork();
    const a = await createMessenger({ transports: [memoryTransport({ network, admissionLimit: 1024 })], healthCheck: false });
    const b = await createMessenger({ transports: [memoryTransport({ network, admissionLimit: 1024 })], healthCheck: false });
    open.push(a, b);
    b.on('x', () => {});
    const peer = await a.connect(b.addresses[0]!);
    b.pause(a.self.id);
    const waits: Promise<string>[] = [];
    for (let i = 0; i < 20; i++) {
      const r = a.send(peer.id, 0, 'x', new Uint8Array(200));
      if (r !== true) waits.push(r.then(() => 'ok', (e: { code: string }) => e.code));
    }
    expect(waits.length).toBeGreaterThan(0);
    const pending = a.request(peer.id, 'nobody', null).catch((e: { code: string }) => e.code);
    a.disconnect(peer.id, 'app says bye');
    expect(new Set(await Promise.all(waits))).toEqual(new Set(['ERR_CLOSED']));
    expect(await pending).toBe('ERR_CLOSED');
  });
});

describe('short replies (review 2, item 11: protocol.md §3.4/§4.3)', () => {
  for (const kind of [0x04, 0x05]) {
    it(`a ${kind === 0x04 ? 'RESPONSE' : 'ERROR_RESPONSE'} shorter than 6 bytes closes the link with ERR_MALFORMED_ENVELOPE`, async () => {
      const a = await tcpNode();
      const gone = new Promise<string>((r) => a.onPeerGone((e) => r(e.code)));
      const raw = await rawPeer(a.addresses[0]!, sockets);
      await waitFor(() => a.peers().length === 1, 5_000, 'the raw peer established');
      raw.send(Uint8Array.from([kind, 0, 0, 0, 1]));
      expect(await within(gone, 5_000, 'the link closing')).toBe('ERR_MALFORMED_ENVELOPE');
      await within(raw.closed, 5_000, 'the socket closing');
    });
  }
});
