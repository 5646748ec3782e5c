#!/usr/bin/env node
// `npm test`: format and lint (biome), the type check, then every suite (vitest on Node, then the shared suites under Deno
// and Bun), then one plain "N passed, N failed" line. Each suite reports counts (vitest JSON, JUnit
// XML from `deno test` and `bun test`); a suite that cannot report (crash, type errors, a missing
// runtime binary) counts as one failure.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
let passed = 0;
let failed = 0;
const timings = [];
/** Names of the tests that failed, printed again last: a CI log is often read from its tail. */
const failures = [];

function run(label, cmd, args, env = {}) {
  process.stdout.write(`\n=== ${label}: ${cmd} ${args.join(' ')}\n`);
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  timings.push(`${label} ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  if (r.error !== undefined) process.stdout.write(`${label}: ${r.error.message}\n`);
  return r.status ?? 1;
}

/** The first binary among `candidates` that answers `--version`. */
function findBinary(candidates) {
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    const r = spawnSync(c, ['--version'], { stdio: 'ignore', env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' } });
    if (r.status === 0) return c;
  }
  return undefined;
}

/** Counts from a JUnit XML report (the root `<testsuites>` element), or undefined if unreadable. */
function junitCounts(file) {
  if (!existsSync(file)) return undefined;
  const head = /<testsuites\b([^>]*)>/.exec(readFileSync(file, 'utf8'));
  if (head === null) return undefined;
  const attr = (name) => Number(new RegExp(`\\b${name}="(\\d+)"`).exec(head[1])?.[1] ?? 0);
  const tests = attr('tests');
  const bad = attr('failures') + attr('errors');
  return { passed: Math.max(0, tests - bad - attr('skipped')), failed: bad };
}

/** `file > name` of each failed `<testcase>` in a JUnit XML report. */
function junitFailures(file) {
  const xml = readFileSync(file, 'utf8');
  const names = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    if (m[3] === undefined || !/<(failure|error)\b/.test(m[3])) continue;
    const attr = (name) => new RegExp(`\\b${name}="([^"]*)"`).exec(m[1])?.[1] ?? '?';
    names.push(`${attr('classname')} > ${attr('name')}`);
  }
  return names;
}

/** Run a suite that writes JUnit XML to `out`, and add its counts. */
function runJunit(label, cmd, args, out, env = {}) {
  rmSync(out, { force: true });
  const status = run(label, cmd, args, env);
  const counts = junitCounts(out);
  if (counts !== undefined && counts.failed > 0) for (const n of junitFailures(out)) failures.push(`${label}: ${n}`);
  rmSync(out, { force: true });
  if (counts === undefined) {
    process.stdout.write(`${label}: no report (exit ${status}); counted as one failure\n`);
    failed += 1;
    return;
  }
  passed += counts.passed;
  failed += counts.failed;
  // A crash after the report, or a module that failed to load, still fails the run.
  if (status !== 0 && counts.failed === 0) failed += 1;
}

/** Entry files of a runtime (`test/runtimes/<dir>/*<suffix>`), sorted. */
function entries(dir, suffix) {
  const full = join(root, 'test', 'runtimes', dir);
  return readdirSync(full)
    .filter((f) => f.endsWith(suffix))
    .sort()
    .map((f) => `./test/runtimes/${dir}/${f}`);
}

// 1. Format and lint (biome.json: width 120). One check; `npm run format` fixes what it can.
if (run('lint', bin('biome'), ['check', '.']) === 0) passed += 1;
else failed += 1;

// 2. Type check (strict, erasable-only). One check.
if (run('typecheck', bin('tsc'), ['--noEmit', '-p', 'tsconfig.json']) === 0) passed += 1;
else failed += 1;

// 3. vitest: unit, property, fuzz, integration suites, cross-runtime pairs.
const out = join(root, '.vitest-results.json');
rmSync(out, { force: true });
const status = run('vitest', bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile=${out}`]);
if (existsSync(out)) {
  const r = JSON.parse(readFileSync(out, 'utf8'));
  passed += r.numPassedTests ?? 0;
  failed += r.numFailedTests ?? 0;
  for (const file of r.testResults ?? []) {
    for (const t of file.assertionResults ?? []) {
      if (t.status === 'failed') failures.push(`vitest: ${relative(root, file.name)} > ${t.fullName}`);
    }
    // A file that failed to load has no assertion results but a message.
    if (file.status === 'failed' && (file.assertionResults ?? []).length === 0) {
      failures.push(`vitest: ${relative(root, file.name)} (did not run: ${String(file.message).split('\n')[0]})`);
    }
  }
  // A suite that fails to load has no tests but still fails the run.
  if (status !== 0 && (r.numFailedTests ?? 0) === 0) failed += 1;
  rmSync(out, { force: true });
} else {
  failed += 1;
}

// 4. Deno: the conformance and mux integration suites over the Deno adapters (`deno test`, vitest
// mapped to test/portable by deno.json, npm packages from node_modules, offline).
const deno = findBinary([bin('deno'), join(root, 'node_modules', 'deno', 'deno')]);
if (deno === undefined) {
  process.stdout.write(
    '\n=== deno: no working deno binary in node_modules (npm ci installs deno 2.9.6); counted as one failure\n',
  );
  failed += 1;
} else {
  runJunit(
    'deno',
    deno,
    [
      'test',
      '--cached-only',
      '--no-check',
      '--allow-net',
      '--allow-read',
      '--allow-env',
      '--junit-path=.deno-results.xml',
      ...entries('deno', '.deno.ts'),
    ],
    join(root, '.deno-results.xml'),
    { DENO_NO_UPDATE_CHECK: '1' },
  );
}

// 5. Bun: the same suites over the Bun adapters (`bun test` maps vitest imports to bun:test).
// `npm ci --ignore-scripts` leaves .bin/bun a placeholder: fall back to the platform package.
const bun = findBinary([
  bin('bun'),
  join(root, 'node_modules', '@oven', 'bun-linux-x64', 'bin', 'bun'),
  join(root, 'node_modules', '@oven', 'bun-linux-x64-baseline', 'bin', 'bun'),
]);
if (bun === undefined) {
  process.stdout.write(
    '\n=== bun: no working bun binary in node_modules (npm ci installs bun 1.4.4); counted as one failure\n',
  );
  failed += 1;
} else {
  runJunit(
    'bun',
    bun,
    [
      'test',
      '--timeout',
      '30000',
      '--reporter=junit',
      '--reporter-outfile=.bun-results.xml',
      ...entries('bun', '.bun.ts'),
    ],
    join(root, '.bun-results.xml'),
  );
}

if (failures.length > 0) process.stdout.write(`\nfailed:\n${failures.map((f) => `  ${f}`).join('\n')}\n`);
process.stdout.write(`\n(${timings.join(', ')})\n${passed} passed, ${failed} failed\n`);
process.exit(failed === 0 ? 0 : 1);
