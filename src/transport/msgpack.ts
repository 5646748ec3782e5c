/**
 * MessagePack for control payloads (hello, GOAWAY, unary bodies, error notices), with explicit limits.
 *
 * `@msgpack/msgpack` defaults every `max*Length` to 2^32-1, so a 6-byte message announcing a huge
 * array would make the decoder reserve it. Here every limit is at most the next power of two above
 * the message's own length (each element takes at least one byte), so decoding never reserves more
 * than about twice what the peer actually sent. 64-bit integers decode as `bigint` (`useBigInt64`),
 * so u64 ids (worker, anchor, session) survive a round trip; smaller integers stay numbers.
 *
 * Never used per batch: the `_stream_batch` path has a fixed binary envelope.
 *
 * @packageDocumentation
 */
import { Decoder, Encoder } from '@msgpack/msgpack';

let encoder: Encoder | undefined;
const decoders = new Map<number, Decoder>();

/**
 * Encode `value`. The result is a view of a shared buffer, valid only until the next call: callers
 * hand it straight to a `send`, which copies it.
 */
export function encodeShared(value: unknown): Uint8Array {
  encoder ??= new Encoder({ useBigInt64: true, ignoreUndefined: true });
  return encoder.encodeSharedRef(value);
}

/** Encode `value` into a fresh buffer the caller owns. */
export function encodeOwned(value: unknown): Uint8Array {
  return encodeShared(value).slice();
}

/** Decode one MessagePack value that fills `bytes` exactly. Throws on malformed or trailing input. */
export function decodeBounded(bytes: Uint8Array): unknown {
  let limit = 16;
  while (limit < bytes.byteLength) limit *= 2;
  let decoder = decoders.get(limit);
  if (decoder === undefined) {
    decoder = new Decoder({
      useBigInt64: true,
      maxStrLength: limit,
      maxBinLength: limit,
      maxArrayLength: limit,
      maxMapLength: limit,
      maxExtLength: limit,
    });
    decoders.set(limit, decoder);
  }
  return decoder.decode(bytes);
}
