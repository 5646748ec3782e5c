// Adapter options: every bound is checked when the client is made, naming the function and the field.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { etcdDiscovery } from '../../src/discovery/etcd.ts';
import { natsDiscovery } from '../../src/discovery/nats.ts';
import { resolveDiscoveryOptions } from '../../src/discovery/options.ts';
import { staticDiscovery } from '../../src/discovery/static.ts';

function fields(make: () => unknown): readonly string[] {
  try {
    make();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).fields;
  }
  throw new Error('accepted');
}

describe('discovery adapter options', () => {
  it('defaults are finite: 30 s TTL, 5 s per operation, 4 KiB records, 1024 queued events', () => {
    expect(resolveDiscoveryOptions({}, 'test')).toEqual({
      ttlMs: 30_000,
      timeoutMs: 5_000,
      maxRecordBytes: 4096,
      maxWatchQueue: 1024,
    });
  });

  it('out-of-bound and unknown options are a ConfigError naming each field', () => {
    expect(fields(() => staticDiscovery({ ttlMs: 999 }))).toEqual(['ttlMs']);
    expect(fields(() => staticDiscovery({ timeoutMs: 0, maxRecordBytes: 10 }))).toEqual([
      'timeoutMs',
      'maxRecordBytes',
    ]);
    expect(fields(() => staticDiscovery({ maxWatchQueue: Number.POSITIVE_INFINITY }))).toEqual(['maxWatchQueue']);
    expect(fields(() => etcdDiscovery({ prefix: '' }))).toEqual(['prefix']);
    expect(fields(() => etcdDiscovery({ hosts: [] }))).toEqual(['hosts']);
    expect(fields(() => etcdDiscovery({ client: {} as never }))).toEqual(['client']);
    expect(fields(() => natsDiscovery({ bucket: 'a.b' }))).toEqual(['bucket']);
    expect(fields(() => natsDiscovery({ replicas: 9, maxWatchedWorkers: 0 }))).toEqual([
      'replicas',
      'maxWatchedWorkers',
    ]);
    expect(fields(() => natsDiscovery({ servers: 'x', extra: 1 } as never))).toEqual(['extra']);
    expect(() => etcdDiscovery({ ttlMs: 1 })).toThrow(/invalid options for etcdDiscovery/);
  });

  it('making a client connects nothing: a client of an unreachable store closes at once', async () => {
    const started = Date.now();
    await etcdDiscovery({ hosts: '127.0.0.1:1' }).close();
    await natsDiscovery({ servers: 'nats://127.0.0.1:1' }).close();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
