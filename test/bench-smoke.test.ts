// The benchmark cannot rot: `npm run bench -- --quick` runs every scenario at tiny sizes and each
// one must produce rows with sane figures (finite, > 0). The bench imports the built output, so
// dist/ is rebuilt first when any file under src/ is newer than it. Numbers are not judged here.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { scratchDir } from './support/scratch.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const work = scratchDir('lanemux-bench-smoke-');
afterAll(() => rmSync(work, { recursive: true, force: true }));

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function ensureBuild(): void {
  const index = join(root, 'dist', 'index.js');
  if (existsSync(index) && statSync(index).mtimeMs >= newestMtime(join(root, 'src'))) return;
  const tsc = spawnSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    { cwd: root, encoding: 'utf8' },
  );
  expect(tsc.status, `build failed:\n${tsc.stdout}${tsc.stderr}`).toBe(0);
}

interface Stat {
  med: number;
  min: number;
  max: number;
}
const sane = (s: Stat | null | undefined, what: string): void => {
  expect(s, `${what}: no figure`).toBeTruthy();
  for (const v of [s!.med, s!.min, s!.max]) {
    expect(Number.isFinite(v) && v > 0, `${what}: ${v}`).toBe(true);
  }
};

/** Run one bench script (built first) and parse the JSON line it prints last. */
function benchRow(script: string, args: string[]) {
  ensureBuild();
  const r = spawnSync(process.execPath, [join(root, 'bench', script), ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 110_000,
  });
  expect(r.status, `${script} exited ${r.status}:\n${r.stderr.slice(-3000)}`).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

describe('npm run bench -- --quick', () => {
  // A quick run takes ~60 s on a quiet 2-core machine and over 140 s beside a loaded suite: the bound is for a hang.
  it('runs every scenario and reports sane figures', { timeout: 330_000 }, () => {
    ensureBuild();
    const out = join(work, 'bench.json');
    const r = spawnSync(process.execPath, [join(root, 'bench', 'run.mjs'), '--quick', '--json', out], {
      cwd: root,
      encoding: 'utf8',
      timeout: 320_000,
    });
    expect(r.status, `bench exited ${r.status}:\n${r.stderr.slice(-3000)}`).toBe(0);
    const { summary, failures } = JSON.parse(readFileSync(out, 'utf8'));
    expect(failures).toBe(0);
    expect(r.stdout).toContain('### 1. Decode shape');

    // 1. every implementation in every shape, with throughput, CPU and pass latency
    const impls = new Set(summary.decode.map((row: { impl: string }) => row.impl));
    expect([...impls].sort()).toEqual([
      'auto',
      'auto-iter',
      'd',
      'h2',
      'h2-sse',
      'manual',
      'per-stream',
      'ws',
      'yamux',
    ]);
    for (const row of summary.decode) {
      const what = `decode X=${row.x} Y=${row.y} W=${row.w} ${row.impl}`;
      expect(row.ok_runs, what).toBe(row.runs);
      sane(row.tokens_per_s, `${what} tokens/s`);
      sane(row.cpu_us_per_token, `${what} CPU`);
      sane(row.p50_ms, `${what} p50`);
      sane(row.p99_ms, `${what} p99`);
      if (row.impl !== 'd') expect(row.vs_d.tokens_per_s, what).toBeGreaterThan(0);
      // lanemux rows carry their ratios to node:http2 and to SSE over HTTP/2 from the same round
      if (['auto', 'auto-iter', 'manual'].includes(row.impl)) {
        for (const base of ['vs_h2', 'vs_sse'])
          for (const k of ['tokens_per_s', 'cpu', 'p50', 'p99'])
            expect(row[base][k], `${what} ${base}.${k}`).toBeGreaterThan(0);
      }
    }
    expect(r.stdout).toContain('### 1b. lanemux beside node:http2 and SSE over HTTP/2');
    // 2. tokens per write: 3 shapes × legacy/auto/manual
    expect(summary.tpw).toHaveLength(9);
    for (const row of summary.tpw) sane(row.tokens_per_write, `tokens/write ${row.shape} ${row.mode}`);
    // 3. lifecycle: attach, zero-RTT, per-stream, yamux, then open + close alone for attach and zero-RTT
    expect(summary.lifecycle.map((row: { mode: string }) => row.mode)).toEqual([
      'attach',
      'zero-rtt',
      'per-stream',
      'yamux',
      'attach-0',
      'zero-rtt-0',
    ]);
    for (const row of summary.lifecycle) {
      sane(row.streams_per_s, `lifecycle ${row.mode} streams/s`);
      sane(row.cpu_us_per_stream, `lifecycle ${row.mode} CPU`);
    }
    // 4. memory: both sides measured; the churn run ends with no live slot
    for (const item of ['64', '1024', '4096', '61440']) {
      for (const k of ['recv_rss', 'send_rss'])
        expect(Number.isFinite(summary.memory[item]?.[k]?.med), `memory ${item} B ${k}`).toBe(true);
    }
    expect(summary.churn.live_after).toBe(0);
    expect(Number.isFinite(summary.churn.heap_growth_bytes)).toBe(true);
    // 5. latency: raw floor and four policies
    expect(summary.latency).toHaveLength(5);
    for (const row of summary.latency) sane(row.p50_ms, `latency ${row.mode}`);
    // 6. lanes 1/2/4/8
    expect(summary.lanes.map((row: { lanes: number }) => row.lanes)).toEqual([1, 2, 4, 8]);
    for (const row of summary.lanes) sane(row.mb_per_s, `lanes ${row.lanes}`);
    // 6b. the same over WebTransport, Deno → Deno
    expect(summary.lanesWt.map((row: { lanes: number }) => row.lanes)).toEqual([1, 2, 4, 8]);
    for (const row of summary.lanesWt) sane(row.mb_per_s, `WebTransport lanes ${row.lanes}`);
    // 7. scale: lanemux Auto, (d) and node:http2 at every point of both series, and the chart beside the JSON
    expect(summary.scale.map((row: { x: number; y: number; impl: string }) => `${row.x}/${row.y}/${row.impl}`)).toEqual(
      ['64/1', '256/1', '256/4'].flatMap((pt) => ['auto', 'd', 'h2'].map((impl) => `${pt}/${impl}`)),
    );
    for (const row of summary.scale) {
      sane(row.tokens_per_s, `scale X=${row.x} Y=${row.y} ${row.impl} tokens/s`);
      sane(row.cpu_us_per_token, `scale X=${row.x} Y=${row.y} ${row.impl} CPU`);
    }
    expect(readFileSync(join(work, 'scale-quick.svg'), 'utf8').match(/<polyline /g)).toHaveLength(12);
  });

  it('bench/alloc.mjs reports the bytes allocated per token, by call site', { timeout: 120_000 }, () => {
    const row = benchRow('alloc.mjs', ['--slots', '16', '--window', '2', '--passes', '100', '--top', '5']);
    expect(row.bytes_per_token > 0 && Number.isFinite(row.bytes_per_token)).toBe(true);
    expect(row.sites.length).toBeGreaterThan(0);
    for (const site of row.sites) expect(typeof site.site === 'string' && site.bytes_per_token > 0).toBe(true);
  });

  it('bench/alloc.mjs --read iter measures anchors read with for await', { timeout: 120_000 }, () => {
    const row = benchRow('alloc.mjs', [
      '--slots',
      '16',
      '--window',
      '2',
      '--passes',
      '100',
      '--top',
      '5',
      '--read',
      'iter',
    ]);
    expect(row.read).toBe('iter');
    expect(row.bytes_per_token > 0 && Number.isFinite(row.bytes_per_token)).toBe(true);
  });

  it('bench/ab.mjs runs one side with its own flags (--b-flags "--resume off" reaches that side only)', {
    timeout: 120_000,
  }, () => {
    // A flag list starts with dashes: read as a flag of its own, it once left both sides running the same thing.
    const row = benchRow('ab.mjs', [
      '--a',
      'dist',
      '--b',
      'dist',
      '--b-flags',
      '--resume off',
      '--pairs',
      '1',
      '--',
      '--slots',
      '8',
      '--window',
      '1',
      '--passes',
      '20',
      '--warm',
      '5',
    ]);
    expect(row.b_flags).toEqual(['--resume', 'off']);
    expect(row.a_flags).toBeUndefined();
    expect(row.pairs).toBe(1);
    expect(row.cpu_us_per_token.a > 0 && row.cpu_us_per_token.b > 0).toBe(true);
  });

  it('bench/inproc.mjs reports the CPU per token of both nodes in one process, every token read', {
    timeout: 120_000,
  }, () => {
    const row = benchRow('inproc.mjs', ['--slots', '16', '--window', '2', '--passes', '100', '--warm', '20']);
    expect(row).toMatchObject({ bench: 'inproc', slots: 16, window: 2, passes: 100 });
    expect(row.cpu_ns_per_token > 0 && Number.isFinite(row.cpu_ns_per_token)).toBe(true);
    expect(row.tokens_per_s > 0).toBe(true);
  });

  it('bench/inproc.mjs on its virtual clock reads every token, timers firing when nothing else is left to run', {
    timeout: 120_000,
  }, () => {
    // 0.1 ms a pass: the replies' 1 ms linger fires only as the clock jumps to it; without the jump
    // credit would never come back and the run would stall.
    const row = benchRow('inproc.mjs', [
      '--slots',
      '16',
      '--window',
      '2',
      '--passes',
      '100',
      '--warm',
      '20',
      '--virtual-clock',
    ]);
    expect(row).toMatchObject({ bench: 'inproc', slots: 16, passes: 100, virtual_clock: true });
    expect(row.cpu_ns_per_token > 0 && Number.isFinite(row.cpu_ns_per_token)).toBe(true);
  });
});
