// The static adapter's file and entries: read once on first use, validated per record like any store.
import { writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { DiscoveryError } from '../../src/discovery/errors.ts';
import { staticDiscovery } from '../../src/discovery/static.ts';
import { scratchDir } from '../support/scratch.ts';
import { sample, show, take } from './conformance.ts';

const A = '00000000000000a1';
const B = '00000000000000b2';
const C = '00000000000000c3';

const file = JSON.stringify({
  workers: [
    { v: 1, ...sample(A) },
    { v: 1, workerId: B, addresses: { tcp: 'tcp://10.0.0.6:7000' }, lanes: 2 },
    { v: 1, workerId: C, addresses: { tcp: 'not a url' }, lanes: 2 },
    { v: 1, addresses: { tcp: 'tcp://10.0.0.7:7000' }, lanes: 1 },
  ],
});

describe('static discovery from a file and entries', () => {
  it('resolves the workers of a file; a bad entry makes only its own worker invalid, and a watch reports it', async () => {
    const reads: string[] = [];
    const d = staticDiscovery({
      file: 'fleet.json',
      readFile: async (path) => {
        reads.push(path);
        return file;
      },
    });
    expect((await d.resolve(A))?.metadata).toEqual({ zone: 'eu-a', role: 'engine' });
    expect((await d.resolve(B))?.addresses).toEqual({ tcp: 'tcp://10.0.0.6:7000' });
    await expect(d.resolve(C)).rejects.toMatchObject({ code: 'ERR_DISCOVERY_INVALID_RECORD' });
    expect(await d.resolve('00000000000000d4')).toBeUndefined();
    const events = await take(d.watch(), 5);
    expect(events.map(show)).toEqual([
      `put ${A} zone=eu-a`,
      `put ${B} zone=`,
      `invalid ${C} ERR_DISCOVERY_INVALID_RECORD`,
      'invalid fleet.json#3 ERR_DISCOVERY_INVALID_RECORD',
      'synced',
    ]);
    expect(reads).toEqual(['fleet.json']);
    await d.close();
  });

  it('a file that is not JSON of workers fails every read with ERR_DISCOVERY_INVALID_RECORD; an unreadable one is tried again', async () => {
    const garbage = staticDiscovery({ file: 'x.json', readFile: async () => '{"workers": {}}' });
    await expect(garbage.resolve(A)).rejects.toThrow(/x.json: expected \{ "workers"/);
    const big = staticDiscovery({ file: 'x.json', maxFileBytes: 10, readFile: async () => file });
    await expect(big.resolve(A)).rejects.toMatchObject({ code: 'ERR_DISCOVERY_INVALID_RECORD' });
    let attempts = 0;
    const flaky = staticDiscovery({
      file: 'x.json',
      readFile: async () => {
        if (++attempts === 1) throw new Error('EIO');
        return new TextEncoder().encode(file);
      },
    });
    const err = await flaky.resolve(A).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiscoveryError);
    expect(err).toMatchObject({ code: 'ERR_DISCOVERY_UNAVAILABLE', retryable: true });
    expect((await flaky.resolve(A))?.workerId).toBe(0xa1n);
    expect(attempts).toBe(2);
  });

  it("reads the file from disk with the runtime's own reader when none is given", async () => {
    const dir = scratchDir('static-discovery-');
    try {
      const path = join(dir, 'fleet.json');
      writeFileSync(path, file);
      const d = staticDiscovery({ file: path });
      expect((await d.resolve(B))?.lanes).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('entries are validated when given (a ConfigError), live without a lease, and a registration can replace one', async () => {
    expect(() => staticDiscovery({ entries: [{ ...sample(A), lanes: 99 }] })).toThrow(ConfigError);
    expect(() => staticDiscovery({ nope: 1 } as never)).toThrow(/invalid options for staticDiscovery/);
    const d = staticDiscovery({ entries: [sample(A), sample(B, 'b')], ttlMs: 1000 });
    expect((await d.resolve(B))?.metadata['zone']).toBe('eu-b');
    await d.register({ ...sample(A), metadata: { zone: 'moved' } });
    expect((await d.resolve(A))?.metadata).toEqual({ zone: 'moved' });
    await d.close();
  });
});
