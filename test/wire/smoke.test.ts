import { describe, it, expect } from 'vitest';
import { BatchEncoder, decodeBatch, slotId, decodeFrame, isTerminalSentinel, FRAME_FINALIZED, splitmix64 } from '../../src/wire/index.ts';

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' ');

describe('wire smoke', () => {
  it('round trips', () => {
    const e = new BatchEncoder();
    e.begin(0x0102030405060708n, 0xdeadbeef);
    const s = slotId(0xabcdef, 0x42);
    e.appendData(s, 7, Uint8Array.from([0xaa, 0xbb, 0xcc]));
    e.appendItemString(s, 8, 'hello wörld, a long enough token string');
    e.appendItemBytes(s, 9, new Uint8Array(300));
    e.appendData(s, 10, FRAME_FINALIZED);
    e.appendCloseSlot(s, 11, 0);
    const b = e.finish();
    expect(hex(b.subarray(0, 32))).toBe('02 00 00 05 01 02 03 04 05 06 07 08 de ad be ef 00 ab cd ef 42 00 00 00 07 00 00 00 03 aa bb cc');
    const d = decodeBatch(b);
    expect(d.error).toBeNull();
    expect(d.records.length).toBe(5);
    expect(decodeFrame(d.records[1]!.body)).toEqual({ kind: 'Item', value: 'hello wörld, a long enough token string' });
    expect((decodeFrame(d.records[2]!.body) as { value: Uint8Array }).value.byteLength).toBe(300);
    expect(isTerminalSentinel(d.records[3]!.body)).toBe(true);
    expect(splitmix64(0n)).toBe(0xe220a8397b1dcdafn);
  });
});
