/**
 * The public surface: the root entry exports the names an application needs and nothing of the
 * engine's insides, and the published declarations show no internal member of a public class. An
 * internal that leaks into `lanemux` (a constant, a resolver, a codec helper) fails here; moving a name
 * is a decision to make in this list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildPackage, ROOT, type PackageFixture } from './package-fixture.ts';

/** Every name of `lanemux` (values and types), sorted. */
const ROOT_NAMES = [
  'AnchorConsumer',
  'AnchorConsumption',
  'AnchorHandle',
  'AttachOptions',
  'CallContext',
  'CallError',
  'CallErrorCode',
  'CallHandler',
  'CallOptions',
  'CallStream',
  'ClientOptions',
  'ConfigError',
  'DialEndedEvent',
  'DrainOptions',
  'DrainSummary',
  'FlushPolicy',
  'GapMarker',
  'HistoryOptions',
  'LanemuxClient',
  'LanemuxError',
  'LanemuxNode',
  'MUX_DEFAULTS',
  'Messenger',
  'MpscAnchor',
  'MpscAnchorOptions',
  'MpscEvent',
  'MpscSender',
  'MuxConfig',
  'MuxError',
  'MuxMetrics',
  'NodeDiscoveryOptions',
  'NodeLogger',
  'NodeOptions',
  'NodeRegistration',
  'OpenOptions',
  'OpenRelayOptions',
  'OverrunPolicy',
  'PeerId',
  'PeerInfo',
  'PeerStateEvent',
  'Relay',
  'RelayOptions',
  'ServeOptions',
  'ResumeFailedError',
  'ResumeFailure',
  'ReattachOptions',
  'ResumeOptions',
  'Retirement',
  'Runtime',
  'StreamAnchor',
  'StreamError',
  'StreamErrorCode',
  'StreamOpenTicket',
  'StreamSender',
  'createClient',
  'createNode',
  'formatHandle',
  'isLanemuxError',
  'openRelay',
  'parseHandle',
  'parseTicket',
  'relay',
  'systemRuntime',
].sort();

/** The names an `export { … }` / `export type { … }` list of `file` gives. */
function exportedNames(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const names: string[] = [];
  for (const m of text.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)) {
    for (const part of m[1]!.split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .pop()!
        .trim();
      if (name !== '') names.push(name);
    }
  }
  return names.sort();
}

describe('public surface', () => {
  it('the root entry exports exactly the names an application uses', () => {
    expect(exportedNames(join(ROOT, 'src', 'index.ts'))).toEqual(ROOT_NAMES);
  });

  it('the root entry values load and are what they say', async () => {
    const root = (await import('../../src/index.ts')) as Record<string, unknown>;
    expect(Object.keys(root).sort()).toEqual(
      [
        'CallError',
        'CallStream',
        'ConfigError',
        'LanemuxClient',
        'LanemuxError',
        'LanemuxNode',
        'MUX_DEFAULTS',
        'MpscAnchor',
        'MpscSender',
        'MuxError',
        'MuxMetrics',
        'ResumeFailedError',
        'StreamAnchor',
        'StreamError',
        'StreamSender',
        'createClient',
        'createNode',
        'formatHandle',
        'isLanemuxError',
        'openRelay',
        'parseHandle',
        'parseTicket',
        'relay',
        'systemRuntime',
      ].sort(),
    );
  });

  describe('published declarations', () => {
    let pkg: PackageFixture;
    beforeAll(() => {
      pkg = buildPackage();
    }, 120_000);
    afterAll(() => pkg?.remove());

    it('public classes show no internal member (_feed, _start, _fail, …)', () => {
      const leaked: string[] = [];
      for (const rel of [
        'stream/anchor.d.ts',
        'stream/mpsc-anchor.d.ts',
        'stream/sender.d.ts',
        'stream/mpsc-sender.d.ts',
        'stream/node.d.ts',
        'stream/lanemux-client.d.ts',
        'stream/anchor-reader.d.ts',
        'stream/relay.d.ts',
        'stream/call.d.ts',
      ]) {
        const text = readFileSync(join(pkg.dir, 'dist', rel), 'utf8');
        for (const m of text.matchAll(/^\s+(?:readonly\s+|static\s+|get\s+|set\s+)*(_[A-Za-z]\w*)\s*[(:<?]/gm))
          leaked.push(`${rel}: ${m[1]}`);
      }
      expect(leaked).toEqual([]);
    });
  });
});
