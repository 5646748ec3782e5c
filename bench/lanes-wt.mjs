#!/usr/bin/env node
// Lane scaling over WebTransport, Deno → Deno (scenario 6's second half): runs the two roles of
// lanes-wt.deno.ts as separate Deno processes (the consumer behind the Deno server adapter, the
// producer on Deno's global WebTransport) and prints the producer's JSON line.
// Usage: node bench/lanes-wt.mjs [--lanes 1] [--streams 64] [--items 200] [--item 16384]
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { emitAndExit, parseArgs, repoRoot, watchdog } from './harness.mjs';

const args = parseArgs();
const lanes = String(args.lanes ?? 1);
const streams = String(args.streams ?? 64);
const items = String(args.items ?? 200);
const item = String(args.item ?? 16384);
const timeoutMs = Number(args.timeout ?? 55_000);
watchdog(timeoutMs, 'lanes-wt');

const deno = join(repoRoot, 'node_modules', '.bin', 'deno');
const script = join(repoRoot, 'bench', 'lanes-wt.deno.ts');
const flags = ['run', '--unstable-net', '--node-modules-dir=manual', '--cached-only', '-A', script];
const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1' };

const recv = spawn(deno, [...flags, 'recv', lanes, streams], {
  cwd: repoRoot,
  env,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const ready = await new Promise((resolve, reject) => {
  const rl = createInterface({ input: recv.stdout });
  rl.once('line', (line) => resolve(JSON.parse(line)));
  recv.once('exit', (code) => reject(new Error(`deno recv exited with ${code} before it was ready`)));
});
const send = spawn(deno, [...flags, 'send', ready.url, ready.hashHex, lanes, items, item], {
  cwd: repoRoot,
  env,
  stdio: ['ignore', 'pipe', 'inherit'],
});
let out = '';
send.stdout.on('data', (d) => (out += d));
const code = await new Promise((resolve) => send.once('exit', resolve));
recv.kill();
const last = out.trim().split('\n').pop() ?? '';
if (code !== 0 || !last.startsWith('{'))
  await emitAndExit({ bench: `lanes-wt-${lanes}`, error: `deno send exited with ${code}: ${out.slice(-300)}` }, 1);
await emitAndExit(JSON.parse(last));
