/**
 * The codec of unary request and reply bodies: a small control body (plain objects of ASCII strings
 * and naturals, as the attach request and its answer are) by hand (wire/plain-codec.ts), anything else
 * through the general MessagePack path with its limits (wire/msgpack.ts). Both give the same bytes
 * and the same values; the hand path only costs less. The node's messenger only: the browser client
 * (`lanemux/client`) keeps the general path, within its bundle budget.
 */
import { decodeBounded, encodeShared } from '../wire/msgpack.ts';
import { GIVE_UP, readPlain, writePlain } from '../wire/plain-codec.ts';

/** `encodeShared(value)`: a view of a shared buffer, valid until the next call. */
export function encodeBody(value: unknown): Uint8Array {
  return writePlain(value) ?? encodeShared(value);
}

/** `decodeBounded(bytes)`: throws on malformed input, as it does. */
export function decodeBody(bytes: Uint8Array): unknown {
  const plain = readPlain(bytes);
  return plain === GIVE_UP ? decodeBounded(bytes) : plain;
}
