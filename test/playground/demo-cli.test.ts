/**
 * `npm start` as a first-time user meets it (playground/demo.mjs, run from a built copy of the
 * package): `--help` explains every option, a wrong flag is one line and exit 2 (no stack trace),
 * and when the output is a pipe the progress comes on lines of its own and the results are
 * explained in words beside the metric names.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage, type PackageFixture } from '../packaging/package-fixture.ts';

let pkg: PackageFixture;
beforeAll(() => {
  pkg = buildPackage(['playground/demo.mjs', 'bench/decode-sim.mjs']);
}, 120_000);
afterAll(() => pkg?.remove());

function demo(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(pkg.dir, 'playground', 'demo.mjs'), ...args], {
    cwd: pkg.dir,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('npm start (the demo) for a first-time user', () => {
  it('--help names and explains every option it accepts', () => {
    const r = demo('--help');
    expect(r.status).toBe(0);
    for (const flag of [
      '--requests',
      '--frontends',
      '--tokens',
      '--max-batch',
      '--pass-ms',
      '--credit',
      '--lanes',
      '--modes',
      '--yield-sends',
      '--json',
      '--quiet',
      '--help',
    ])
      expect(r.stdout).toMatch(new RegExp(`^\\s+${flag}\\b.*\\S`, 'm'));
    expect(r.stdout).toContain('one TCP connection per request');
  });

  it('an unknown flag or a bad value is one line on stderr and exit 2, not a stack trace', () => {
    for (const args of [['--bogus'], ['--requests', 'many'], ['--modes', 'fast']]) {
      const r = demo(...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(/^demo: /);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(demo('--bogus').stderr).toContain('--help');
  });

  it('into a pipe: progress on lines of its own (no carriage returns), results explained in words', () => {
    const r = demo('--requests', '16', '--tokens', '8', '--pass-ms', '0', '--frontends', '2');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('\r');
    expect(r.stdout).toMatch(/\| legacy per-stream \|/);
    expect(r.stdout).toMatch(/\| mux Auto +\|/);
    expect(r.stdout).toContain('What the columns mean');
    expect(r.stdout).toMatch(/fewer writes than one connection per request/);
    expect(r.stdout).toMatch(/no token overran its reader's buffer \(reader_stall_total = 0\)/);
  });

  it('--quiet prints no progress line, only the results', () => {
    const r = demo('--requests', '8', '--tokens', '4', '--pass-ms', '0', '--modes', 'auto', '--quiet');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('running');
    expect(r.stdout).toMatch(/\| mux Auto +\|/);
  });
});
