// `npm start` (interim): encode one batch of token records, decode it, and print both.
// The decode-engine simulation over loopback TCP replaces this once the mux lands.
import { BatchEncoder, decodeBatch, decodeFrame, slotId, RecordType, CloseReason, FRAME_FINALIZED } from '../dist/wire/index.js';

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' ');
const names = Object.fromEntries(Object.entries(RecordType).map(([k, v]) => [v, k]));

const enc = new BatchEncoder();
enc.begin(1n, 0, 0);
const tokens = ['The', ' quick', ' brown', ' fox'];
for (let s = 0; s < 3; s++) {
  const slot = slotId(s, 0);
  enc.appendOpenSlot(slot, 0, 0x1122334455667788n + BigInt(s), 0x99n);
}
const batch1 = enc.finish().slice();
enc.begin(1n, 1, 0);
tokens.forEach((t, i) => {
  for (let s = 0; s < 3; s++) enc.appendItemString(slotId(s, 0), i + 1, `${t}#${s}`);
});
enc.appendData(slotId(0, 0), tokens.length + 1, FRAME_FINALIZED);
enc.appendCloseSlot(slotId(0, 0), tokens.length + 2, CloseReason.TerminalSent);
const batch2 = enc.finish().slice();

for (const [label, batch] of [['open batch', batch1], ['token batch', batch2]]) {
  const { header, records, error } = decodeBatch(batch);
  console.log(`\n${label}: ${batch.byteLength} bytes, ${records.length} records, epoch ${header.epoch}, batch_seq ${header.batchSeq}`);
  console.log(`  header  ${hex(batch.subarray(0, 16))}`);
  for (const r of records) {
    const detail = r.type === RecordType.Data ? JSON.stringify(decodeFrame(r.body)) : r.type === RecordType.OpenSlot ? `anchor 0x${r.anchorId.toString(16)}` : r.type === RecordType.CloseSlot ? `reason ${r.closeReason}` : '';
    console.log(`  ${names[r.type].padEnd(13)} slot ${r.slot >>> 8}/${r.slot & 0xff} seq ${String(r.frameSeq).padEnd(3)} ${detail}`);
  }
  if (error) console.log(`  error: ${error.kind}`);
}
