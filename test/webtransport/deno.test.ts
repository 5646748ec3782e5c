// Runs the Deno-side WebTransport suites under `deno test` (the conformance suite Deno → Deno with 1
// and 4 lanes, and the server adapter's limits) and reports each Deno test case as one vitest test,
// so `npm test` (vitest) covers them without a separate deno step. Deno runs once, at collection.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DENO, DENO_ENV, ROOT, removeDir } from './support.ts';
import { scratchDir } from '../support/scratch.ts';

const FILES = [
  'test/webtransport/conformance.deno.ts',
  'test/webtransport/adapter.deno.ts',
  'test/webtransport/handshake-stall.deno.ts',
  'test/webtransport/auth.deno.ts',
  'test/webtransport/cert-restart.deno.ts',
];

interface Case {
  readonly name: string;
  readonly failure: string | undefined;
}

function runDeno(): { status: number | null; cases: Case[]; output: string } {
  const dir = scratchDir('lanemux-deno-');
  try {
    const junit = join(dir, 'junit.xml');
    const r = spawnSync(
      DENO,
      [
        'test',
        '--no-check',
        '--unstable-net',
        '--allow-net',
        '--allow-read',
        '--allow-env',
        '--reporter=dot',
        `--junit-path=${junit}`,
        ...FILES,
      ],
      {
        cwd: ROOT,
        env: DENO_ENV,
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    const xml = (() => {
      try {
        return readFileSync(junit, 'utf8');
      } catch {
        return '';
      }
    })();
    const cases: Case[] = [];
    for (const m of xml.matchAll(/<testcase name="([^"]*)"[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)) {
      const body = m[3] ?? '';
      const failure = /<failure[^>]*>([\s\S]*?)<\/failure>|<failure[^>]*message="([^"]*)"/.exec(body);
      cases.push({
        name: unescapeTeamcity(m[1] ?? ''),
        failure: failure === null ? undefined : unescapeTeamcity(failure[1] ?? failure[2] ?? 'failed'),
      });
    }
    return { status: r.status, cases, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
  } finally {
    removeDir(dir);
  }
}

function unescapeTeamcity(s: string): string {
  return s
    .replace(/&gt;/g, '>')
    .replace(/&lt;/g, '<')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

const run = runDeno();

describe('deno test: WebTransport Deno → Deno', () => {
  it('deno test ran every case and exited 0', () => {
    expect(run.cases.length, run.output.slice(-4000)).toBeGreaterThanOrEqual(31);
    expect(run.status, run.output.slice(-4000)).toBe(0);
  });
  for (const c of run.cases) {
    it(c.name, () => {
      expect(c.failure, c.failure).toBeUndefined();
    });
  }
});
