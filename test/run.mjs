#!/usr/bin/env node
// `npm test`: the type check, then every suite, then one plain "N passed, N failed" line.
// Each suite reports counts; a suite that cannot report (crash, type errors) counts as one failure.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
let passed = 0;
let failed = 0;

function run(label, cmd, args, env = {}) {
  process.stdout.write(`\n=== ${label}: ${cmd} ${args.join(' ')}\n`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  return r.status ?? 1;
}

// 1. Type check (strict, erasable-only). One check.
if (run('typecheck', bin('tsc'), ['--noEmit', '-p', 'tsconfig.json']) === 0) passed += 1;
else failed += 1;

// 2. vitest: unit, property, fuzz, integration suites.
const out = join(root, '.vitest-results.json');
rmSync(out, { force: true });
const status = run('vitest', bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile=${out}`]);
if (existsSync(out)) {
  const r = JSON.parse(readFileSync(out, 'utf8'));
  passed += r.numPassedTests ?? 0;
  failed += r.numFailedTests ?? 0;
  // A suite that fails to load has no tests but still fails the run.
  if (status !== 0 && (r.numFailedTests ?? 0) === 0) failed += 1;
  rmSync(out, { force: true });
} else {
  failed += 1;
}

process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
process.exit(failed === 0 ? 0 : 1);
