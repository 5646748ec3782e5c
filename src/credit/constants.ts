/**
 * Credit constants and defaults (docs/protocol.md §8 attach answer, §10.7).
 */

/**
 * Default per-slot data credit C, `initial_credit`: 32 Data records.
 *
 * The slot buffer is C+1 deep (docs/protocol.md §10.7); 0 is refused at build. Older defaults and
 * benchmark rigs used 256; tests pass C explicitly.
 */
export const DEFAULT_INITIAL_CREDIT = 32;

/**
 * Default per-slot byte budget, `slot_byte_budget`: 1 MiB (1,048,576 bytes).
 *
 * `slot_byte_budget = 0` means "use the default" (1 MiB). On the receiver it is the
 * slot's byte watermark (grants are withheld while the slot buffers at least this many bytes) and its hold budget.
 */
export const DEFAULT_SLOT_BYTE_BUDGET = 1_048_576;

/**
 * Default per-peer byte budget, `peer_byte_budget`: 8 MiB (8,388,608 bytes).
 *
 * Receive side only; shared by all lanes of a peer.
 */
export const DEFAULT_PEER_BYTE_BUDGET = 8_388_608;

/**
 * Largest credit count a ledger holds: 2^32−1.
 *
 * A `CreditUpdate` carries a u32 delta (docs/protocol.md §10.2); a grant adds with saturation: grants
 * saturate at 2^32−1 and never wrap.
 */
export const MAX_CREDIT = 0xffff_ffff;
