/**
 * docs/protocol.md §10 is what a second implementation is written from: its golden bytes must be
 * the bytes this codec writes. Each table row and example is read from the document itself.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BatchEncoder } from '../../src/wire/encoder.ts';
import { encodeFrame } from '../../src/wire/frame.ts';
import { splitmix64 } from '../../src/wire/lane-hash.ts';
import { hex } from './helpers.ts';

const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'protocol.md'), 'utf8');
const section = doc.slice(doc.indexOf('## 10. The batch payload'));

/** The bytes in backticks of the table row that starts with `label`. */
function rowBytes(label: string): string {
  const line = section.split('\n').find((l) => l.startsWith(`| ${label}`));
  if (line === undefined) throw new Error(`no row "${label}" in protocol.md §10`);
  const cells = line.split('|');
  return /`([0-9a-fr ]+)`/.exec(cells[cells.length - 2]!)![1]!;
}

const SLOT = (0xabcdef << 8) | 0x42;

function record(write: (e: BatchEncoder) => void): string {
  const e = new BatchEncoder({ maxBytes: 4096 });
  e.begin(1n, 0, 0);
  write(e);
  return hex(e.finish().subarray(16));
}

describe('docs/protocol.md §10 golden bytes are the codec’s', () => {
  it('batch header', () => {
    const e = new BatchEncoder({ maxBytes: 4096 });
    e.begin(0x0102030405060708n, 0xdeadbeef, 0);
    e.appendCreditUpdate(1, 0, 1);
    e.appendCreditUpdate(2, 0, 1);
    const golden = /→\n?`([0-9a-f ]+)`/.exec(section)![1]!;
    expect(hex(e.finish().subarray(0, 16))).toBe(golden);
  });

  it('every record of §10.4', () => {
    expect(record((e) => e.appendData(SLOT, 7, Uint8Array.of(0xaa, 0xbb, 0xcc)))).toBe(rowBytes('Data, seq 7'));
    expect(record((e) => e.appendOpenSlot(SLOT, 0, 0x1122334455667788n, 0x99aabbccddeeff00n))).toBe(
      rowBytes('OpenSlot'),
    );
    for (const r of [0, 1, 2, 3] as const)
      expect(record((e) => e.appendCloseSlot(SLOT, 0, r))).toBe(rowBytes('CloseSlot').replace('0r', `0${r}`));
    expect(record((e) => e.appendCreditUpdate(SLOT, 0, 256))).toBe(rowBytes('CreditUpdate'));
    expect(record((e) => e.appendSlotHeartbeat(SLOT, 9))).toBe(rowBytes('SlotHeartbeat'));
    expect(record((e) => e.appendLifecycleSlot(SLOT, 0, 0x99aabbccddeeff00n, 1))).toBe(rowBytes('LifecycleSlot'));
  });

  it('every StreamFrame of §10.5', () => {
    const frames = {
      '`Finalized`': { kind: 'Finalized' },
      '`Detached`': { kind: 'Detached' },
      '`Dropped`': { kind: 'Dropped' },
      '`Heartbeat`': { kind: 'Heartbeat' },
    } as const;
    for (const [label, frame] of Object.entries(frames)) expect(hex(encodeFrame(frame))).toBe(rowBytes(label));
    const item = section.split('\n').find((l) => l.startsWith('| `Item(v)`'))!;
    expect(item).toContain(`\`${hex(encodeFrame({ kind: 'Item', value: 'hi' }))}\``);
    expect(item).toContain(`\`${hex(encodeFrame({ kind: 'Item', value: 42 }))}\``);
    expect(item).toContain(`\`${hex(encodeFrame({ kind: 'Item', value: Uint8Array.of(1, 2) }))}\``);
    expect(hex(encodeFrame({ kind: 'SenderError', message: '' }))).toBe(`${rowBytes('`SenderError(s)`')} a0`);
    expect(hex(encodeFrame({ kind: 'TransportError', message: '' }))).toBe(`${rowBytes('`TransportError(s)`')} a0`);
  });

  it('the lane hash', () => {
    expect(splitmix64(0n).toString(16)).toBe(/hash\(0\) = 0x([0-9a-f]+)/.exec(section)![1]);
    expect(splitmix64(1n).toString(16)).toBe(/hash\(1\) = 0x([0-9a-f]+)/.exec(section)![1]);
    const lanes = /keys 0–7 go to lanes\n?`\[([0-9, ]+)\]`/.exec(section)![1]!.split(', ').map(Number);
    expect(Array.from({ length: 8 }, (_, k) => Number(splitmix64(BigInt(k)) % 4n))).toEqual(lanes);
  });
});

describe('docs/protocol.md §8.2 `_stream_window` example is what the mux sends', () => {
  it('MESSAGE head + 8-byte u64 release', async () => {
    const { encodeWindowUpdate, WINDOW_HANDLER } = await import('../../src/mux/peer-window.ts');
    const { messageHead } = await import('../../src/messenger/envelope.ts');
    const body = encodeWindowUpdate(2 * 1024 * 1024, new Uint8Array(8));
    const head = messageHead(new TextEncoder().encode(WINDOW_HANDLER));
    const s82 = doc.slice(doc.indexOf('### 8.2'));
    const golden = /```\n([0-9a-f ]+)\n```/.exec(s82)![1]!;
    expect(`${hex(head)} ${hex(body)}`).toBe(golden);
  });
});
