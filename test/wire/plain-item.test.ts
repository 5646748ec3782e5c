/**
 * Object items by hand on the node's paths: the body `send` stages and the port takes is the body
 * `encodeFrame` makes, a staged body never outlives its `send` (a value changed afterwards goes as it
 * is then), the staging is the item's check (a value it takes is one `itemRefusal` accepts), and
 * ingress reads every such body as the general decoder does.
 */
import { inspect, isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame } from '../../src/wire/frame.ts';
import { itemRefusal } from '../../src/wire/item.ts';
import { writePlain } from '../../src/wire/plain-codec.ts';
import { dropStagedItem, encodeItemBody, GIVE_UP, readItemAt, stageItem } from '../../src/wire/plain-item.ts';
import { mulberry32Unit } from './helpers.ts';

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const LEAVES: readonly unknown[] = [
  'text-delta',
  '',
  'héllo wörld',
  '日本語のトークン',
  'emoji \u{1f600}',
  '\ud800',
  'x'.repeat(300),
  0,
  7,
  300,
  70_000,
  2 ** 32,
  -1,
  0.5,
  true,
  false,
  null,
  undefined,
  5n,
  new Date(0),
  new Uint8Array(2),
  Symbol('s'),
  new Map(),
  new (class Tokens extends Array<number> {})(),
  Object.assign(new (class Tokens extends Array<number> {})(), [1]),
];

/** An AI SDK-like chunk with random damage and nesting. */
function chunk(r: () => number, depth = 0): unknown {
  if (depth > 2 || r() < 0.3) return pick(r, LEAVES);
  if (r() < 0.25) return Array.from({ length: Math.floor(r() * 4) }, () => chunk(r, depth + 1));
  const o: Record<string | symbol, unknown> = {
    type: pick(r, ['text-delta', 'reasoning-delta', 'finish']),
    id: `s${Math.floor(r() * 2000)}`,
  };
  if (r() < 0.8) o['delta'] = chunk(r, depth + 1);
  if (r() < 0.05) o[Symbol('k')] = 1;
  if (r() < 0.05) Object.defineProperty(o, '__proto__', { value: 1, enumerable: true });
  if (r() < 0.05) Object.setPrototypeOf(o, { inherited: true });
  return o;
}

describe('object items by hand (node paths)', () => {
  it('a staged body is the body encodeFrame makes, and staging takes only what itemRefusal accepts', () => {
    const r = mulberry32Unit(31);
    let staged = 0;
    for (let i = 0; i < 4000; i++) {
      const v = chunk(r);
      if (typeof v === 'string' || v instanceof Uint8Array) continue;
      const took = stageItem(v);
      try {
        if (!took) continue;
        staged++;
        expect(itemRefusal(v), inspect(v)).toBeUndefined();
        const body = encodeItemBody(v);
        expect([...body]).toEqual([...encodeFrame({ kind: 'Item', value: v })]);
      } finally {
        dropStagedItem();
      }
    }
    expect(staged).toBeGreaterThan(1000);
  });

  it('encodeItemBody writes what encodeFrame writes for every value itemRefusal accepts', () => {
    const r = mulberry32Unit(32);
    for (let i = 0; i < 4000; i++) {
      const v = chunk(r);
      if (typeof v === 'string' || v instanceof Uint8Array || v === undefined || itemRefusal(v) !== undefined) continue;
      expect([...encodeItemBody(v)], inspect(v)).toEqual([...encodeFrame({ kind: 'Item', value: v })]);
    }
  });

  it('staging takes nothing itemRefusal refuses, even where the bytes would be the same', () => {
    for (const v of [
      Object.defineProperty({ a: 1 }, '__proto__', { value: undefined, enumerable: true }),
      Object.setPrototypeOf(new Uint8Array([1, 2]), null),
    ]) {
      expect(itemRefusal(v)).toBeDefined();
      expect(stageItem(v)).toBe(false);
      dropStagedItem();
    }
  });

  it('a value whose getter throws is not staged: itemRefusal reports it', () => {
    const v = {
      type: 'text-delta',
      get delta(): string {
        throw new Error('no delta');
      },
    };
    expect(stageItem(v)).toBe(false);
    expect(itemRefusal(v)?.message).toContain('no delta');
  });

  it('a value changed after its send is encoded as it is then, not from the staged body', () => {
    const v = { type: 'text-delta', id: 's1', delta: 'before' };
    expect(stageItem(v)).toBe(true);
    dropStagedItem(); // send returned without the port taking the body
    v.delta = 'after';
    expect(decodeFrame(encodeItemBody(v))).toEqual({
      kind: 'Item',
      value: { type: 'text-delta', id: 's1', delta: 'after' },
    });
    // Staged, then the shared buffer written again before the port asks: the body is written anew.
    expect(stageItem(v)).toBe(true);
    writePlain({ other: 1 });
    expect(decodeFrame(encodeItemBody(v))).toEqual({ kind: 'Item', value: v });
    dropStagedItem();
  });

  it('ingress reads every object item body as the general decoder does, and leaves the rest to it', () => {
    const r = mulberry32Unit(33);
    let read = 0;
    for (let i = 0; i < 4000; i++) {
      const v = chunk(r);
      if (v === undefined || itemRefusal(v) !== undefined) continue;
      const body = encodeFrame({ kind: 'Item', value: v });
      const framed = new Uint8Array(body.byteLength + 7);
      framed.set(body, 3);
      const mine = readItemAt(framed, 3, 3 + body.byteLength);
      if (mine === GIVE_UP) continue;
      read++;
      const frame = decodeFrame(body);
      expect(frame.kind).toBe('Item');
      expect(isDeepStrictEqual(mine, (frame as { value: unknown }).value), inspect(v)).toBe(true);
    }
    expect(read).toBeGreaterThan(1000);
    for (const other of [
      encodeFrame({ kind: 'Finalized' }),
      encodeFrame({ kind: 'SenderError', message: 'x' }),
      new Uint8Array([0x81, 0xa4, 0x49, 0x74, 0x65]),
    ])
      expect(readItemAt(other, 0, other.byteLength)).toBe(GIVE_UP);
  });
});
