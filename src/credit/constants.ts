/**
 * Credit constants and defaults (protocol.md §7 "Zero semantics", §8; credit-model.md §3).
 */

/**
 * Default per-slot data credit C, `initial_credit`: 32 Data records.
 *
 * Spec (protocol.md §8): "`initial_credit` (C) | 32 | Slot buffer depth C+1. 0 is refused at build."
 * Older defaults and benchmark rigs used 256; tests pass C explicitly (§17 item 5).
 */
export const DEFAULT_INITIAL_CREDIT = 32;

/**
 * Default per-slot byte budget, `slot_byte_budget`: 1 MiB (1,048,576 bytes).
 *
 * Spec (protocol.md §7): "`slot_byte_budget = 0` means 'use the default' (1 MiB)." On the receiver it is the
 * slot's byte watermark (grants are withheld while the slot buffers at least this many bytes) and its hold budget.
 */
export const DEFAULT_SLOT_BYTE_BUDGET = 1_048_576;

/**
 * Default per-peer byte budget, `peer_byte_budget`: 8 MiB (8,388,608 bytes).
 *
 * Spec (protocol.md §8): "receive side only; shared by all lanes of a peer".
 */
export const DEFAULT_PEER_BYTE_BUDGET = 8_388_608;

/**
 * Largest credit count a ledger holds: 2^32−1.
 *
 * Spec (protocol.md §9.4, behaviours CREDIT-12): a `CreditUpdate` carries a u32 delta and "a grant adds with
 * saturation"; grants "saturate at 2^32−1 and never wrap".
 */
export const MAX_CREDIT = 0xffff_ffff;
