/**
 * The one-minute soak (`npm run soak -- --minutes 1`, test/soak/soak.ts) in its own process: mixed
 * TCP and WebSocket load with link cuts and resume, kept modest (8 streams per producer) so it stays
 * reliable on a loaded machine. Its verdict scales the flatness bound with the run (soak.ts): 1 MB
 * per 10 minutes plus 5 MB × (10 − minutes) / 9 for JIT growth and sampling noise, so 5.1 MB over
 * this one minute; in-order delivery and slots and binds returning to 0 are not scaled.
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('soak', () => {
  it('a one-minute mixed load with cuts keeps memory flat, delivers in order and leaves no slot or bind', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--expose-gc',
        '--import',
        './test/support/ts-register.mjs',
        'test/soak/soak.ts',
        '--minutes',
        '1',
        '--concurrency',
        '8',
        '--seed',
        '7',
      ],
      { cwd: root, encoding: 'utf8', timeout: 230_000 },
    );
    const line = r.stdout.split('\n').find((l) => l.startsWith('SOAK_RESULT '));
    expect(line, `${r.stdout}\n${r.stderr}`).toBeDefined();
    const result = JSON.parse(line!.slice('SOAK_RESULT '.length)) as { verdict: string; problems: string[] };
    expect(result.problems, r.stdout).toEqual([]);
    expect(result.verdict).toBe('PASS');
    expect(r.status).toBe(0);
  }, 240_000);
});
