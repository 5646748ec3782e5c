/**
 * The fuzz harness behind `npm run fuzz` (test/fuzz/): a short run over every target finds no
 * escape and reaches both outcomes of each decoder, the judge really flags each kind of escape, and
 * the replay command reproduces a verdict from the input's hex alone.
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { WireError } from '../../src/wire/errors.ts';
import { hex } from '../wire/helpers.ts';
import { replay, runFuzz } from './harness.ts';
import type { Target } from './targets.ts';
import { TARGETS } from './targets.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function fake(run: (input: Uint8Array) => string | null): Target {
  return {
    name: 'fake',
    what: 'self-test',
    codes: new Set(['ERR_DESERIALIZATION']),
    allocBound: (n) => n,
    prepare() {},
    input: () => Uint8Array.of(1, 2, 3),
    run,
  };
}

describe('fuzz harness', () => {
  it(`${TARGETS.length} targets × 1,200 mutated and random inputs: no escape, every target decodes some and refuses some`, () => {
    const r = runFuzz({ seed: 0x5eed_f022, inputs: TARGETS.length * 1_200, targets: TARGETS });
    expect(r.escapes).toEqual([]);
    expect(r.guardConstructions).toBeGreaterThan(0);
    for (const t of TARGETS) {
      const s = r.stats[t.name]!;
      expect(s.inputs, t.name).toBe(1_200);
      expect(s.decoded, `${t.name} decodes some inputs`).toBeGreaterThan(0);
      if (t.codes.size > 0) expect(s.refused, `${t.name} refuses some inputs`).toBeGreaterThan(0);
    }
  });

  it('flags a foreign throw, an undocumented code, a broken invariant, an oversized allocation and a slow decode', () => {
    const input = Uint8Array.of(1, 2, 3);
    expect(
      replay(
        fake(() => null),
        input,
      ),
    ).toBeNull();
    expect(
      replay(
        fake(() => {
          throw new WireError('ERR_DESERIALIZATION', 'refused');
        }),
        input,
      ),
    ).toBeNull();
    expect(
      replay(
        fake(() => {
          throw new TypeError('x is undefined');
        }),
        input,
      ),
    ).toMatch(/threw TypeError/);
    expect(
      replay(
        fake(() => {
          throw new WireError('ERR_BATCH_FULL', 'no');
        }),
        input,
      ),
    ).toMatch(/ERR_BATCH_FULL \(not documented/);
    expect(
      replay(
        fake(() => 'records differ'),
        input,
      ),
    ).toBe('records differ');
    expect(
      replay(
        fake(() => (new Uint8Array(4), null)),
        input,
      ),
    ).toMatch(/allocated Uint8Array\(4\) for a 3-byte input/);
    const slow = fake(() => {
      const until = performance.now() + 30;
      while (performance.now() < until) {}
      return null;
    });
    expect(replay(slow, input, 10)).toMatch(/took \d+ ms \(bound 10 ms\)/);
  });

  it('the same seed deals the same inputs', () => {
    const seen = (seed: number) => {
      const out: string[] = [];
      runFuzz({ seed, inputs: 200, targets: TARGETS, onInput: (_i, _t, input) => out.push(hex(input)) });
      return out;
    };
    const a = seen(7);
    expect(seen(7)).toEqual(a);
    expect(seen(8)).not.toEqual(a);
  });

  it('npm run fuzz -- --replay <hex> --target <name> judges one input from its hex', () => {
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, ['--import', './test/support/ts-register.mjs', 'test/fuzz/cli.ts', ...args], {
        cwd: root,
        encoding: 'utf8',
        timeout: 110_000,
      });
    const r = cli('--replay', 'f04c4d5800', '--target', 'hello');
    expect(r.stdout).toContain('hello: no escape (5 bytes)');
    expect(r.status).toBe(0);
  }, 120_000);
});
