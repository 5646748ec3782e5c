// The portable vitest shim checks itself under Deno: each matcher passes when it should and fails
// (with a message naming the values) when it should not, so a suite cannot pass vacuously.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

function fails(fn: () => void, needle: string): void {
  let message: string | undefined;
  try {
    fn();
  } catch (e) {
    message = (e as Error).message;
  }
  if (message === undefined) throw new Error(`expected a failure mentioning ${needle}`);
  if (!message.includes(needle)) throw new Error(`failure "${message}" does not mention ${needle}`);
}

const order: string[] = [];

describe('portable vitest shim', () => {
  beforeEach(() => {
    order.push('before');
  });
  afterEach(() => {
    order.push('after');
  });

  it('runs hooks around each test', () => {
    expect(order.slice(-1)).toEqual(['before']);
  });

  it('hooks ran for the previous test too', () => {
    expect(order).toEqual(['before', 'after', 'before']);
  });

  it('equality matchers pass and fail like vitest', () => {
    expect({ a: 1, b: undefined, n: 2n, u: Uint8Array.of(1, 2) }).toEqual({ a: 1, n: 2n, u: Uint8Array.of(1, 2) });
    fails(() => expect({ a: 1 }).toEqual({ a: 2 }), 'to equal');
    fails(() => expect(Uint8Array.of(1, 2)).toEqual(Uint8Array.of(1, 3)), 'to equal');
    fails(() => expect([1, 2]).toEqual([1, 2, 3]), 'to equal');
    fails(() => expect(1).toBe(2), 'expected 1 to be 2');
    fails(() => expect(1).not.toBe(1), 'not to be');
    fails(() => expect(1, 'label').toBe(2), 'label: ');
    expect(new Map([[1, { x: [1] }]])).toEqual(new Map([[1, { x: [1] }]]));
    fails(() => expect(new Set([1])).toEqual(new Set([2])), 'to equal');
  });

  it('toMatchObject reads error properties and honours asymmetric matchers', () => {
    const e = Object.assign(new Error('boom'), { code: 'ERR_X', retryable: true });
    expect(e).toMatchObject({ code: expect.stringMatching(/^ERR_/), message: 'boom' });
    fails(() => expect(e).toMatchObject({ code: 'ERR_Y' }), 'to match object');
    fails(() => expect({ a: [1, 2] }).toMatchObject({ a: [1] }), 'to match object');
    expect({ a: 1, b: { c: 2, d: 3 } }).toMatchObject({ b: { c: 2 } });
  });

  it('comparison, type and container matchers', () => {
    expect(2).toBeGreaterThan(1);
    fails(() => expect(1).toBeGreaterThanOrEqual(2), 'greater than or equal');
    fails(() => expect(3).toBeLessThanOrEqual(2), 'less than or equal');
    fails(() => expect(2).toBeLessThan(2), 'less than');
    expect('abc').toContain('b');
    fails(() => expect([1, 2]).toContain(3), 'to contain');
    fails(() => expect([1]).toHaveLength(2), 'to have length');
    fails(() => expect(undefined).toBeDefined(), 'to be defined');
    fails(() => expect(0).toBeNull(), 'to be null');
    fails(() => expect('x').toBeTypeOf('number'), 'of type number');
    fails(() => expect({}).toBeInstanceOf(Error), 'instance of Error');
    fails(() => expect(() => {}).toThrow(), 'to throw');
    expect(() => {
      throw new Error('nope 42');
    }).toThrow(/nope \d+/);
  });

  it('resolves and rejects', async () => {
    await expect(Promise.resolve(3)).resolves.toBe(3);
    await expect(Promise.reject(Object.assign(new Error('m'), { code: 'ERR_A' }))).rejects.toMatchObject({
      code: 'ERR_A',
    });
    await expect(Promise.reject(new Error('initial_credit = 0'))).rejects.toThrow(/initial_credit = 0/);
    let message = '';
    await expect(Promise.resolve(1))
      .rejects.toBe(1)
      .catch((e: Error) => (message = e.message));
    expect(message).toContain('expected the promise to reject');
    await expect(Promise.reject(new Error('x')))
      .resolves.toBe(1)
      .catch((e: Error) => (message = e.message));
    expect(message).toContain('expected the promise to resolve');
  });
});
