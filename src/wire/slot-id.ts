import { MAX_SLOT_INDEX } from './constants.ts';
import { WireError } from './errors.ts';

/**
 * A SlotId is a u32: `(index << 8) | generation` (docs/protocol.md §10.2). The index is a u24, the
 * generation a u8 in the low byte, so the raw value sorts by index. Every u32 is a valid SlotId.
 * SlotIds are plain numbers so the per-record path allocates nothing.
 */
export type SlotId = number;

/** Build a SlotId; refuses an index above `0xFFFFFF` or a generation outside 0..255. */
export function slotId(index: number, generation: number): SlotId {
  if (!Number.isInteger(index) || index < 0 || index > MAX_SLOT_INDEX) {
    throw new WireError('ERR_INVALID_SLOT_ID', `slot index ${index} is outside 0..0xFFFFFF`);
  }
  if (!Number.isInteger(generation) || generation < 0 || generation > 0xff) {
    throw new WireError('ERR_INVALID_SLOT_ID', `slot generation ${generation} is outside 0..255`);
  }
  return ((index << 8) | generation) >>> 0;
}

/** The u24 index of a SlotId. */
export function slotIndex(slot: SlotId): number {
  return slot >>> 8;
}

/** The u8 generation of a SlotId. */
export function slotGeneration(slot: SlotId): number {
  return slot & 0xff;
}

/** The same index with the next generation (255 wraps to 0). */
export function bumpGeneration(slot: SlotId): SlotId {
  return ((slot & 0xffff_ff00) | ((slot + 1) & 0xff)) >>> 0;
}

/** The same index with another generation: only the low byte changes. */
export function withGeneration(slot: SlotId, generation: number): SlotId {
  return ((slot & 0xffff_ff00) | (generation & 0xff)) >>> 0;
}

/** Debug form showing index and generation, e.g. `Slot(0xabcdef/0x42)`. */
export function formatSlotId(slot: SlotId): string {
  return `Slot(0x${slotIndex(slot).toString(16)}/0x${slotGeneration(slot).toString(16)})`;
}
