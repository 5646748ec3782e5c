// The stored record: what register accepts, and what a read accepts from a store another writer shares.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { DiscoveryError } from '../../src/discovery/errors.ts';
import { decodeRegistration, encodeRegistration } from '../../src/discovery/record.ts';

const HEX = '00000000000000a1';
const input = {
  workerId: HEX,
  addresses: { tcp: 'tcp://10.0.0.5:7000', wss: 'wss://edge-1.example/lmx' },
  lanes: 4,
  metadata: { zone: 'eu-1', 'app/version': '2.3' },
  credential: 'vault:fleet/engine',
};

function invalidReason(value: unknown, hex: string | undefined = HEX, max = 4096): string {
  const text = typeof value === 'string' || value instanceof Uint8Array ? value : JSON.stringify(value);
  try {
    decodeRegistration(text, `/k/${hex}`, hex, max);
  } catch (e) {
    expect(e).toBeInstanceOf(DiscoveryError);
    expect((e as DiscoveryError).code).toBe('ERR_DISCOVERY_INVALID_RECORD');
    expect((e as DiscoveryError).retryable).toBe(false);
    return (e as DiscoveryError).message;
  }
  throw new Error(`accepted ${String(text).slice(0, 80)}`);
}

describe('registration records', () => {
  it('round-trip every field; a bigint id and defaults give the same record', () => {
    const { text, hex, registration } = encodeRegistration(input, 4096);
    expect(hex).toBe(HEX);
    expect(JSON.parse(text)).toEqual({ v: 1, ...input });
    expect(decodeRegistration(text, 'k', HEX, 4096)).toEqual({ ...registration, workerId: 0xa1n });
    expect(decodeRegistration(new TextEncoder().encode(text), 'k', HEX, 4096)).toEqual(registration);
    const minimal = encodeRegistration({ workerId: 0xa1n, addresses: { tcp: 'tcp://h:1' } }, 4096);
    expect(minimal.registration).toEqual({ workerId: 0xa1n, addresses: { tcp: 'tcp://h:1' }, lanes: 1, metadata: {} });
    expect(JSON.parse(minimal.text)).toEqual({
      v: 1,
      workerId: HEX,
      addresses: { tcp: 'tcp://h:1' },
      lanes: 1,
      metadata: {},
    });
  });

  it('register refuses input out of bounds with a ConfigError naming each field', () => {
    const bad = (over: Record<string, unknown>): string[] => {
      try {
        encodeRegistration({ ...input, ...over } as never, 4096);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return [...(e as ConfigError).fields];
      }
      throw new Error('accepted');
    };
    expect(bad({ workerId: 'a1' })).toEqual(['workerId']);
    expect(bad({ workerId: 2n ** 64n })).toEqual(['workerId']);
    expect(bad({ addresses: {} })).toEqual(['addresses']);
    expect(bad({ addresses: { TCP: 'tcp://h:1' } })).toEqual(['addresses.TCP']);
    expect(bad({ addresses: { tcp: 'h:1' } })).toEqual(['addresses.tcp']);
    expect(bad({ lanes: 17 })).toEqual(['lanes']);
    expect(bad({ metadata: { _x: 'v' } })).toEqual(['metadata._x']);
    expect(bad({ metadata: JSON.parse('{"__proto__":"v"}') })).toEqual(['metadata']);
    expect(bad({ metadata: { k: 'v'.repeat(257) } })).toEqual(['metadata.k']);
    expect(bad({ metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) })).toEqual([
      'metadata',
    ]);
    // A reference name, never a secret blob.
    expect(bad({ credential: 'Bearer eyJhbGciOi…' })).toEqual(['credential']);
    expect(() => encodeRegistration({ ...input, metadata: { a: 'x'.repeat(256), b: 'y'.repeat(256) } }, 512)).toThrow(
      /over maxRecordBytes \(512\)/,
    );
  });

  it('a read refuses what another writer could leave: not JSON, other versions, wrong worker, fields out of bounds, oversize', () => {
    const ok = JSON.parse(encodeRegistration(input, 4096).text) as Record<string, unknown>;
    expect(invalidReason('{"v":1,')).toMatch(/not UTF-8 JSON/);
    expect(invalidReason(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]))).toMatch(/not UTF-8 JSON/);
    expect(invalidReason({ ...ok, v: 2 })).toMatch(/v/);
    expect(invalidReason({ ...ok, workerId: '00000000000000a2' })).toMatch(/names worker 00000000000000a2/);
    expect(invalidReason({ ...ok, workerId: '00000000000000A1' })).toMatch(/workerId/);
    expect(invalidReason({ ...ok, lanes: 0 })).toMatch(/lanes/);
    expect(invalidReason({ ...ok, addresses: { tcp: 42 } })).toMatch(/addresses/);
    expect(invalidReason({ ...ok, metadata: { ok: 'v', 'a b': 'c' } })).toMatch(/metadata/);
    expect(invalidReason({ ...ok, credential: 'secret with spaces' })).toMatch(/credential/);
    expect(invalidReason('null')).toMatch(/expected object/);
    expect(invalidReason(ok, 'not-a-worker')).toMatch(/names no worker id/);
    expect(() => decodeRegistration(JSON.stringify(ok), 'k', undefined, 4096)).toThrow(/names no worker id/);
    expect(invalidReason(ok, HEX, 100)).toMatch(/over maxRecordBytes \(100\)/);
    // The size is checked before parsing: a huge string is refused without being read.
    expect(invalidReason(`[${'['.repeat(1e6)}`, HEX, 4096)).toMatch(/over maxRecordBytes/);
    // A `__proto__` key is refused, not silently dropped.
    const proto = `{"v":1,"workerId":"${HEX}","addresses":{"tcp":"tcp://h:1"},"lanes":1,"metadata":{"__proto__":"x"}}`;
    expect(invalidReason(proto)).toMatch(/a key __proto__/);
    // Unknown fields (a newer writer) are ignored.
    expect(decodeRegistration(JSON.stringify({ ...ok, extra: [1, 2] }), 'k', HEX, 4096).lanes).toBe(4);
  });

  it('no stored value, however hostile, makes a read throw anything but ERR_DISCOVERY_INVALID_RECORD', () => {
    const ok = JSON.parse(encodeRegistration(input, 4096).text) as Record<string, unknown>;
    const values = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.uint8Array({ maxLength: 300 }),
      fc.json({ maxDepth: 4 }),
      fc
        .record({ key: fc.constantFrom(...Object.keys(ok)), value: fc.jsonValue({ maxDepth: 3 }) })
        .map(({ key, value }) => JSON.stringify({ ...ok, [key]: value })),
    );
    fc.assert(
      fc.property(values, (value) => {
        try {
          const r = decodeRegistration(value, 'k', HEX, 512);
          // Whatever is accepted is a well-formed registration of the key's worker.
          expect(r.workerId).toBe(0xa1n);
          expect(Number.isInteger(r.lanes) && r.lanes >= 1 && r.lanes <= 16).toBe(true);
        } catch (e) {
          expect(e).toBeInstanceOf(DiscoveryError);
          expect((e as DiscoveryError).code).toBe('ERR_DISCOVERY_INVALID_RECORD');
        }
      }),
      { numRuns: 2000 },
    );
  });
});
