// The rendezvous control messages follow the one unknown-fields rule of docs/protocol.md §8: a field
// this version does not know is ignored, a known field keeps its type and bounds.
import { describe, expect, it } from 'vitest';
import { parseDescriptor, parsePull } from '../../src/mux/rendezvous.ts';

describe('rendezvous messages and unknown fields', () => {
  it('a stage descriptor with a field this version does not know is read as without it', () => {
    expect(parseDescriptor({ id: 7, size: 100, mux_slot: '1:2:3', later: { any: 'thing' } })).toEqual({
      id: 7,
      size: 100,
      mux_slot: '1:2:3',
    });
  });
  it('a pull or a release with an unknown field is read as without it; a release wins over a range', () => {
    expect(parsePull({ id: 7, offset: 0, length: 10, hint: 1 })).toEqual({ id: 7, offset: 0, length: 10 });
    expect(parsePull({ id: 7, release: true, extra: 'x' })).toEqual({ id: 7, release: true });
    expect(parsePull({ id: 7, release: true, offset: 0, length: 10 })).toEqual({ id: 7, release: true });
  });
  it('a known field of the wrong type is still refused', () => {
    expect(parseDescriptor({ id: '7', size: 100, mux_slot: '1:2:3' })).toBeUndefined();
    expect(parsePull({ id: 7, offset: -1, length: 10 })).toBeUndefined();
  });
});
