/**
 * `lanemux/wire`: the byte-exact `_stream_batch` codec (docs/protocol.md §10).
 *
 * Pure bytes, no timers, no I/O, no runtime imports: the 16-byte batch header, the 13-byte
 * record header plus body, SlotId packing, serial-number batch_seq arithmetic, the splitmix64 lane
 * hash, and `StreamFrame` bodies in the reference's MessagePack shapes.
 *
 * @packageDocumentation
 */
export * from './constants.ts';
export * from './errors.ts';
export * from './slot-id.ts';
export * from './seq.ts';
export * from './lane-hash.ts';
export * from './header.ts';
export * from './encoder.ts';
export * from './decoder.ts';
export * from './frame.ts';
export { utf8Length } from './utf8.ts';
export { itemRefusal } from './item.ts';
