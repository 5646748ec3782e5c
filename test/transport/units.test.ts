// Unit and property tests of the transport's pure parts: framing, admission, HELLO/GOAWAY codec.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/transport/admission.ts';
import { FRAME_PREFIX_BYTES, FrameDecoder, writeFrame } from '../../src/transport/frame.ts';
import { decodeGoaway, decodeHello, encodeGoaway, encodeHello, type Hello } from '../../src/transport/hello.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { isLanemuxError } from '../../src/errors.ts';

function frame(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_PREFIX_BYTES + message.byteLength);
  writeFrame(out, message, undefined);
  return out;
}

describe('FrameDecoder', () => {
  it('writes a big-endian u32 length prefix', () => {
    expect([...frame(Uint8Array.of(0xaa, 0xbb, 0xcc))]).toEqual([0, 0, 0, 3, 0xaa, 0xbb, 0xcc]);
    const out = new Uint8Array(4 + 2 + 1);
    writeFrame(out, Uint8Array.of(1, 2), Uint8Array.of(3));
    expect([...out]).toEqual([0, 0, 0, 3, 1, 2, 3]);
  });

  it('reassembles any split of any sequence of frames (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 20 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 40 }),
        (messages, cuts) => {
          const stream = new Uint8Array(messages.reduce((n, m) => n + 4 + m.byteLength, 0));
          let off = 0;
          for (const m of messages) {
            stream.set(frame(m), off);
            off += 4 + m.byteLength;
          }
          const d = new FrameDecoder(1000, 'test');
          const got: number[][] = [];
          let pos = 0;
          let i = 0;
          while (pos < stream.byteLength) {
            const n = cuts[i++ % cuts.length] as number;
            expect(d.push(stream.subarray(pos, pos + n), (m) => got.push([...m]))).toBeUndefined();
            pos += n;
          }
          expect(got).toEqual(messages.map((m) => [...m]));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses a frame over the limit from its header alone, before allocating it', () => {
    const d = new FrameDecoder(1024, 'peer');
    // Only the 4-byte header of a 1 GiB frame arrives: refused at once.
    const err = d.push(Uint8Array.of(0x40, 0, 0, 0), () => {});
    expect(isLanemuxError(err, 'ERR_FRAME_TOO_LARGE')).toBe(true);
    expect(err?.message).toContain('1073741824');
    // Stopped: later bytes are ignored.
    const seen: Uint8Array[] = [];
    expect(d.push(frame(Uint8Array.of(1)), (m) => seen.push(m))).toBeUndefined();
    expect(seen).toEqual([]);
  });

  it('refuses a header split across chunks too, and accepts exactly the limit', () => {
    const d = new FrameDecoder(4, 'peer');
    expect(d.push(Uint8Array.of(0, 0), () => {})).toBeUndefined();
    expect(
      isLanemuxError(
        d.push(Uint8Array.of(0, 5), () => {}),
        'ERR_FRAME_TOO_LARGE',
      ),
    ).toBe(true);
    const ok = new FrameDecoder(4, 'peer');
    const got: number[][] = [];
    expect(ok.push(frame(Uint8Array.of(1, 2, 3, 4)), (m) => got.push([...m]))).toBeUndefined();
    expect(got).toEqual([[1, 2, 3, 4]]);
  });

  it('stops delivering the rest of a chunk when the consumer stops it', () => {
    const d = new FrameDecoder(100, 'peer');
    const got: number[] = [];
    const chunk = new Uint8Array([...frame(Uint8Array.of(1)), ...frame(Uint8Array.of(2))]);
    d.push(chunk, (m) => {
      got.push(m[0] as number);
      d.stop();
    });
    expect(got).toEqual([1]);
  });
});

describe('AdmissionGate', () => {
  function sink() {
    const written: Uint8Array[] = [];
    let buffered = 0;
    let blocked = 0;
    return {
      written,
      set buffered(v: number) {
        buffered = v;
      },
      get blockedCount() {
        return blocked;
      },
      sink: {
        buffered: () => buffered,
        write: (f: Uint8Array) => {
          written.push(f);
          buffered += f.byteLength;
        },
        blocked: () => {
          blocked++;
        },
      },
    };
  }

  it('admits synchronously below the high-water mark, then waits in FIFO order, then refuses', async () => {
    const s = sink();
    const gate = new AdmissionGate(s.sink, { highWaterMark: 10, maxPendingBytes: 8 }, 'test');
    expect(gate.offer(new Uint8Array(6))).toBe(true);
    expect(gate.offer(new Uint8Array(6))).toBe(true); // 6 < 10: one message may cross the mark
    const a = gate.offer(new Uint8Array(4));
    const b = gate.offer(new Uint8Array(4));
    expect(a).toBeInstanceOf(Promise);
    expect(s.blockedCount).toBe(1);
    expect(gate.pendingBytes).toBe(8);
    await expect(gate.offer(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_SEND_REFUSED', retryable: true });
    const order: string[] = [];
    void (a as Promise<void>).then(() => order.push('a'));
    void (b as Promise<void>).then(() => order.push('b'));
    s.buffered = 0;
    gate.drain();
    await Promise.resolve();
    expect(order).toEqual(['a', 'b']);
    expect(gate.waiting).toBe(0);
    expect(s.written.length).toBe(4);
  });

  it('does not let a new frame overtake waiting ones even when below the mark', () => {
    const s = sink();
    const gate = new AdmissionGate(s.sink, { highWaterMark: 10, maxPendingBytes: 100 }, 'test');
    s.buffered = 20;
    const a = gate.offer(new Uint8Array(1));
    s.buffered = 0; // drained, but nobody called drain() yet
    const b = gate.offer(new Uint8Array(1));
    expect(a).not.toBe(true);
    expect(b).not.toBe(true);
  });

  it('rejects every waiter and later offer once failed', async () => {
    const s = sink();
    const gate = new AdmissionGate(s.sink, { highWaterMark: 1, maxPendingBytes: 100 }, 'test');
    s.buffered = 5;
    const a = gate.offer(new Uint8Array(1));
    const err = new TransportError('ERR_PEER_GONE', 'gone', { retryable: true });
    gate.fail(err);
    await expect(a).rejects.toBe(err);
    await expect(gate.offer(new Uint8Array(1))).rejects.toBe(err);
  });
});

describe('HELLO and GOAWAY', () => {
  const hello: Hello = {
    protocolVersion: 1,
    worker: '0123456789abcdef',
    instance: 'i-1',
    session: 7,
    lane: 3,
    lanes: 8,
    maxMessageSize: 1 << 20,
    keys: ['messenger-mux-v2', 'tcp-stream'],
    address: 'tcp://127.0.0.1:1',
  };

  it('round-trips and starts with F0 "LMX" and the version', () => {
    const bytes = encodeHello(hello);
    expect([...bytes.subarray(0, 6)]).toEqual([0xf0, 0x4c, 0x4d, 0x58, 0, 1]);
    expect(decodeHello(bytes, 1)).toEqual(hello);
  });

  it('reports a version mismatch before looking at the body', () => {
    const bytes = encodeHello({ ...hello, protocolVersion: 2 });
    bytes.fill(0xff, 6); // the body is garbage, the version still decides
    const r = decodeHello(bytes, 1);
    expect(isLanemuxError(r, 'ERR_VERSION_MISMATCH')).toBe(true);
    expect((r as Error).message).toContain('v2');
  });

  it('refuses garbage, bad magic and invalid fields as malformed', () => {
    expect(isLanemuxError(decodeHello(Uint8Array.of(0x47, 0x45, 0x54), 1), 'ERR_MALFORMED_ENVELOPE')).toBe(true);
    const bad = encodeHello(hello);
    bad[2] = 0;
    expect(isLanemuxError(decodeHello(bad, 1), 'ERR_MALFORMED_ENVELOPE')).toBe(true);
    expect(isLanemuxError(decodeHello(encodeHello({ ...hello, lanes: 17 }), 1), 'ERR_MALFORMED_ENVELOPE')).toBe(true);
    expect(isLanemuxError(decodeHello(encodeHello({ ...hello, worker: 'xyz' }), 1), 'ERR_MALFORMED_ENVELOPE')).toBe(
      true,
    );
  });

  it('never throws on arbitrary bytes (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const withPrefix = new Uint8Array([0xf0, 0x4c, 0x4d, 0x58, 0, 1, ...bytes]);
        expect(() => decodeHello(bytes, 1)).not.toThrow();
        expect(() => decodeHello(withPrefix, 1)).not.toThrow();
        expect(() => decodeGoaway(new Uint8Array([0xf1, ...bytes]))).not.toThrow();
      }),
      { numRuns: 500 },
    );
  });

  it('carries a GOAWAY code and message', () => {
    const e = decodeGoaway(encodeGoaway(new TransportError('ERR_FRAME_TOO_LARGE', 'too big')));
    expect(e.code).toBe('ERR_FRAME_TOO_LARGE');
    expect(e.message).toContain('too big');
  });
});
