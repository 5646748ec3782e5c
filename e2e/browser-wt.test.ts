// Real-browser end-to-end over WebTransport: Debian Chromium (playwright-core) runs the vite-built page,
// whose lanemux node consumes token streams from a Deno lanemux server (e2e/servers/deno-wt-server.ts, a
// child process: Node 20 cannot serve WebTransport). The page trusts the server's self-signed ECDSA P-256
// certificate through `serverCertificateHashes`.
import { spawn, execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { drive, startE2e } from './support/harness.ts';
import type { E2eEnv } from './support/harness.ts';
import { tailText, tokenText } from './support/protocol.ts';
import { scratchDir } from '../test/support/scratch.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DENO = join(ROOT, 'node_modules/.bin/deno');

let env: E2eEnv;
let deno: ChildProcess | undefined;
let certDir = '';
let certHashHex = '';
let serverUrl = '';
let p: Page;

/** ECDSA P-256, 10 days (Chromium's serverCertificateHashes rules), and the SHA-256 of its DER. */
function makeCert(dir: string): string {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
      '-days',
      '10',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  const der = execFileSync('openssl', ['x509', '-in', join(dir, 'cert.pem'), '-outform', 'der']);
  return execFileSync('openssl', ['dgst', '-sha256', '-hex'], { input: der, encoding: 'utf8' })
    .trim()
    .split(' ')
    .pop()!;
}

function startDeno(): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      DENO,
      [
        'run',
        '--unstable-net',
        '--node-modules-dir=manual',
        '--allow-net',
        '--allow-read',
        '--allow-env',
        join(ROOT, 'e2e/servers/deno-wt-server.ts'),
        certDir,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    deno = child;
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(
      () => reject(new Error(`the Deno server printed no ready line in 20 s; stderr:\n${stderr}`)),
      20_000,
    );
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the Deno server exited (${code}); stderr:\n${stderr}`));
    });
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { url: string }).url);
    });
  });
}

beforeAll(async () => {
  certDir = scratchDir('lanemux-e2e-cert-');
  certHashHex = makeCert(certDir);
  [env, serverUrl] = await Promise.all([startE2e(), startDeno()]);
  p = await env.openPage();
  await drive(p, 'connect', { url: serverUrl, kind: 'wt', certHashHex });
}, 60_000);

afterAll(async () => {
  await (p ? drive(p, 'close') : Promise.resolve()).catch(() => {});
  if (deno !== undefined && deno.exitCode === null && deno.signalCode === null) {
    deno.removeAllListeners('exit');
    const exited = new Promise<void>((r) => deno!.once('exit', () => r()));
    deno.stdin?.end();
    deno.kill('SIGTERM');
    await exited;
  }
  const pageErrors = env?.pageErrors ?? [];
  await env?.close();
  if (certDir !== '') rmSync(certDir, { recursive: true, force: true });
  expect(pageErrors).toEqual([]);
});

const expected = (prompt: string, n: number): string[] => Array.from({ length: n }, (_, i) => tokenText(prompt, i));

describe('browser over WebTransport (Deno server)', () => {
  it('2. streams tokens to the page: exact content and order, in the DOM too', async () => {
    // The page dialled the Deno server's WebTransport endpoint (the WebSocket client dials ws: only).
    expect(serverUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/lanemux$/);
    const ids = await Promise.all([
      drive(p, 'generate', { prompt: 'wt-alpha', n: 50 }),
      drive(p, 'generate', { prompt: 'wt-beta', n: 3 }),
      drive(p, 'generate', { prompt: 'wt-gamma', n: 0 }),
    ]);
    const rs = await Promise.all(ids.map((id) => drive(p, 'waitEnd', id)));
    expect(rs.map((r) => r.tokens)).toEqual([expected('wt-alpha', 50), expected('wt-beta', 3), []]);
    for (const r of rs) {
      expect(r.end).toBe('finalized');
      expect(r.error).toBeNull();
      expect(await drive(p, 'domText', r.id)).toBe(r.tokens.join(''));
    }
  });

  it('2b. 256 concurrent streams over WebTransport: per-stream order checked in the page', async () => {
    // E2E_TOKENS raises the per-stream count for a longer measurement (the default keeps the suite fast).
    const n = Number(process.env['E2E_TOKENS'] ?? 200);
    const sum = await drive(p, 'generateMany', 256, { prompt: 'wtc', n });
    console.log(
      `[e2e wt] 256 streams x ${n} tokens: ${Math.round(sum.tokensPerSecond)} tokens/s, wall ${sum.wallMs.toFixed(0)} ms, ttft p50 ${sum.ttftP50Ms.toFixed(1)} ms, p99 ${sum.ttftP99Ms.toFixed(1)} ms; generate reply p50 ${sum.replyP50Ms.toFixed(1)} ms`,
    );
    expect(sum.badStreams).toEqual([]);
    expect(sum.allOrdered && sum.allFinalized).toBe(true);
    expect(sum.tokens).toBe(256 * n);
    const r = await drive(p, 'result', sum.ids[255]!);
    expect(r.tokens).toEqual(expected('wtc255', n));
  });

  it('2c. stop and cancel from the page over WebTransport', async () => {
    const stopId = await drive(p, 'generate', { prompt: 'wt-stop', n: 1_000_000, delayMs: 5, tail: 2 });
    const cancelId = await drive(p, 'generate', { prompt: 'wt-cancel', n: 1_000_000, delayMs: 5 });
    await drive(p, 'waitTokens', stopId, 3, 10_000);
    await drive(p, 'waitTokens', cancelId, 3, 10_000);
    await drive(p, 'requestStop', stopId);
    const stopped = await drive(p, 'waitEnd', stopId);
    expect(stopped.end).toBe('finalized');
    expect(stopped.tokens).toEqual([
      ...expected('wt-stop', stopped.mainCount),
      tailText('wt-stop', 0),
      tailText('wt-stop', 1),
    ]);
    await drive(p, 'cancel', cancelId);
    const cancelled = await drive(p, 'waitEnd', cancelId);
    expect(cancelled.end).toBe('cancelled');
    expect(cancelled.tokens).toEqual(expected('wt-cancel', cancelled.tokens.length));
    // The session carries on: a new request after the cancel streams exactly.
    const id = await drive(p, 'generate', { prompt: 'wt-after', n: 10 });
    expect((await drive(p, 'waitEnd', id)).tokens).toEqual(expected('wt-after', 10));
  });
});
