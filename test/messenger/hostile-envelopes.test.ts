// Hostile envelopes from a raw peer over a real messenger: MessagePack container bombs are refused
// without allocating (a REQUEST gets an error reply, a NOTICE closes the link) and a RESPONSE or
// ERROR_RESPONSE shorter than 6 bytes closes the link (docs/protocol.md §3.4, §4.3).
import { afterEach, describe, expect, it } from 'vitest';
import { decodeBounded } from '../../src/wire/msgpack.ts';
import { within } from '../transport/helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { messengerFixture, rawPeer } from '../transport/raw-peer.ts';

const { sockets, tcpMessenger: tcpNode } = messengerFixture(afterEach);

/**
 * `size` bytes of nested containers, each header declaring `declared` items: array16 (`dc`) or map16
 * (`de`, each with a fixint key before the next map). Unchecked, the decoder reserved ~40,000× this.
 */
function bomb(size: number, kind: 'array16' | 'map16', declared = 16_000): Uint8Array {
  const unit =
    kind === 'array16' ? [0xdc, declared >> 8, declared & 0xff] : [0xde, declared >> 8, declared & 0xff, 0x01];
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

describe('MessagePack container bombs over a real messenger', () => {
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

describe('short replies (docs/protocol.md §3.4, §4.3)', () => {
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
