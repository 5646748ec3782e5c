/**
 * An object item's `Item` body (an AI SDK chunk, a plain map) written and read by hand
 * (plain-codec.ts) on the node's paths: the general MessagePack path, its UTF-8 and the body's own
 * buffer were most of what an AI SDK chunk cost, 6.5x a string token of the same text
 * (`node --single-threaded bench/inproc.mjs --item object --token-bytes 4` against `--item string`).
 * The same bytes and values as `encodeFrame` and `decodeRecordAt`; what it does not take goes to them.
 * `lanemux/client` keeps the general path, within its bundle budget.
 */
import { encodeFrame, ITEM_PREFIX, ITEM_PREFIX_LEN } from './frame.ts';
import { GIVE_UP, plainWrites, readPlain, writePlain } from './plain-codec.ts';

const NONE: unique symbol = Symbol('no staged item');
/** The value `send` just wrote a body for, the body (a view of the shared buffer) and when it was written. */
let stagedValue: unknown = NONE;
let stagedBody: Uint8Array | undefined;
let stagedAt = -1;

/**
 * `send` of an object item: write its body now, before the port asks for it. True when the value is a
 * plain one, which `itemRefusal` accepts (strings, naturals, booleans, nil, plain maps without symbol
 * or `__proto__` keys, arrays): the refusal's own walk over the value is then not needed. The port's
 * {@link encodeItemBody} of the same value takes the body; {@link dropStagedItem} forgets it once
 * `send` returns, so a value changed after `send` is never sent as it was.
 */
export function stageItem(value: unknown): boolean {
  let body: Uint8Array | undefined;
  try {
    body = writePlain(value, ITEM_PREFIX);
  } catch {
    // A getter or proxy that throws: `itemRefusal` reports it.
    body = undefined;
  }
  if (body === undefined) {
    stagedValue = NONE;
    return false;
  }
  stagedValue = value;
  stagedBody = body;
  stagedAt = plainWrites();
  return true;
}

/** `send` returned: a staged body not taken is forgotten. */
export function dropStagedItem(): void {
  stagedValue = NONE;
  stagedBody = undefined;
}

/** `encodeFrame({ kind: 'Item', value })` for a value `itemRefusal` accepted: a fresh body. */
export function encodeItemBody(value: unknown): Uint8Array {
  if (value === stagedValue && stagedAt === plainWrites()) {
    const body = stagedBody!.slice();
    dropStagedItem();
    return body;
  }
  return writePlain(value, ITEM_PREFIX)?.slice() ?? encodeFrame({ kind: 'Item', value });
}

/**
 * The value of an `Item` body at `buf[start, end)` when it is a plain value; {@link GIVE_UP} for any
 * other body (a string or bytes item, a terminal, a heartbeat, a value outside the subset).
 */
export function readItemAt(buf: Uint8Array, start: number, end: number): unknown {
  if (end - start <= ITEM_PREFIX_LEN) return GIVE_UP;
  for (let i = 0; i < ITEM_PREFIX_LEN; i++) if (buf[start + i] !== ITEM_PREFIX[i]) return GIVE_UP;
  return readPlain(buf, start + ITEM_PREFIX_LEN, end);
}

export { GIVE_UP };
