// Real-browser end-to-end over WebTransport: Debian Chromium (playwright-core) runs the vite-built page,
// whose lanemux node consumes token streams from a Deno lanemux server (e2e/servers/deno-wt-server.ts, a
// child process: Node 20 cannot serve WebTransport). The page trusts the server's self-signed ECDSA P-256
// certificate through `serverCertificateHashes`.
import { spawn, execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { drive, startE2e } from './support/harness.ts';
import type { E2eEnv } from './support/harness.ts';
import { tailText, tokenText } from './support/protocol.ts';
import { scratchDir } from '../test/support/scratch.ts';
import { seededRandom } from '../test/support/seeded-random.ts';
import { within } from '../test/transport/helpers.ts';
import { recoverySummary } from './support/recovery.ts';
import type { Recovery } from './page/api.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DENO = join(ROOT, 'node_modules/.bin/deno');

let env: E2eEnv;
let deno: ChildProcess | undefined;
let certDir = '';
let certHashHex = '';
let serverUrl = '';
let p: Page;
/** Callers waiting for the Deno server's answer to a stdin command, in order (one line each). */
const answers: Array<(line: string) => void> = [];

/** Send the Deno server a command (see e2e/servers/deno-wt-server.ts) and read its one-line JSON answer. */
function denoCommand<T>(command: string): Promise<T> {
  return new Promise((resolve) => {
    answers.push((line) => resolve(JSON.parse(line) as T));
    deno!.stdin!.write(`${command}\n`);
  });
}

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

/**
 * Start a Deno server (e2e/servers/deno-wt-server.ts) with the certificate in `dir`, on UDP `port` (0: any), as
 * worker `workerId` (hex; default a new one): resolves with the child, its URL and worker id once it printed its
 * ready line; every later line goes to `onLine`.
 */
function spawnDeno(
  dir: string,
  port: number,
  onLine: (line: string) => void,
  workerId?: string,
): Promise<{ child: ChildProcess; url: string; workerId: string }> {
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
        dir,
        String(port),
        ...(workerId === undefined ? [] : [workerId]),
      ],
      {
        cwd: ROOT,
        env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
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
    let ready = false;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (ready) {
        onLine(line);
        return;
      }
      ready = true;
      clearTimeout(timer);
      const said = JSON.parse(line) as { url: string; workerId: string };
      resolve({ child, url: said.url, workerId: said.workerId });
    });
  });
}

/** End a Deno server child (stdin EOF and SIGTERM: it closes its node) and wait for it to exit. */
async function stopDeno(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.removeAllListeners('exit');
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  if (signal === 'SIGTERM') child.stdin?.end();
  child.kill(signal);
  await exited;
}

async function startDeno(): Promise<string> {
  const started = await spawnDeno(certDir, 0, (line) => answers.shift()?.(line));
  deno = started.child;
  return started.url;
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
  if (deno !== undefined) await stopDeno(deno);
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

  it('2d. the QUIC connections of the server close 20 times at random moments while 256 streams flow: every stream resumes, exact and in order', {
    timeout: 60_000,
  }, async () => {
    const CUTS = 20;
    const STREAMS = 256;
    const random = seededRandom(0x7e57_002d);
    const metrics = async (): Promise<Record<string, number>> =>
      (await denoCommand<{ metrics: Record<string, number> }>('metrics')).metrics;
    const q = await env.openPage();
    try {
      await drive(q, 'connect', {
        url: serverUrl,
        kind: 'wt',
        certHashHex,
        // The page's consumer terms: no heartbeat joins the counts; redial soon (defaults: 0.5–3 s).
        mux: { heartbeatInterval: 600_000 },
        transportOptions: { minReconnectionDelay: 50, reconnectionJitter: 50, maxReconnectionDelay: 500 },
        resume: { windowMs: 30_000 },
      });
      // Paced, endless tokens: every stream flows at every cut; a stop ends them all afterwards.
      const ids = await drive(q, 'startMany', STREAMS, { prompt: 'wrs', n: 1_000_000, delayMs: 20, render: false });
      const recoveries: Recovery[] = [];
      const cutWallMs: number[] = [];
      for (let cut = 0; cut < CUTS; cut++) {
        // A random moment (seeded: the same on every run), then the server closes its QUIC connections.
        await new Promise((r) => setTimeout(r, 50 + Math.floor(random() * 350)));
        const { downs } = await drive(q, 'linkState');
        cutWallMs.push(Date.now());
        expect((await denoCommand<{ cut: number }>('cut')).cut).toBeGreaterThan(0);
        // The page's WebTransport dial opens a new session by itself; every stream flows again once resumed.
        recoveries.push(await drive(q, 'waitFlowing', ids, downs, 15_000));
      }
      console.log(`[e2e wt resume] ${recoverySummary(STREAMS, cutWallMs, recoveries)}`);
      expect(recoveries.map((r) => r.open)).toEqual(recoveries.map(() => STREAMS));
      // Every cut suspended every stream and each was resumed once, on both sides; none failed.
      for (const side of [await drive(q, 'metrics'), await metrics()]) {
        expect(side['velo_streaming_resumed_streams_total']).toBe(STREAMS * CUTS);
        expect(Object.keys(side).filter((k) => k.startsWith('velo_streaming_resume_failed_total'))).toEqual([]);
      }
      await drive(q, 'stopMany', ids);
      const sum = await drive(q, 'waitMany', ids);
      expect(sum.badStreams).toEqual([]);
      expect(sum.allOrdered && sum.allFinalized).toBe(true);
      // Exact: each stream got every token its producer took, in order, and nothing else.
      const { served } = await denoCommand<{ served: Record<string, { accepted: number; outcome: string }> }>(
        'served wrs',
      );
      const accepted = ids.map((_, i) => served[`wrs${i}`]!);
      expect(accepted.every((s) => s.outcome === 'stopped')).toBe(true);
      expect(sum.mainCounts).toEqual(accepted.map((s) => s.accepted));
      expect(Math.min(...sum.mainCounts)).toBeGreaterThan(CUTS);
      for (const i of [0, 255])
        expect((await drive(q, 'result', ids[i]!)).tokens).toEqual(expected(`wrs${i}`, sum.mainCounts[i]!));
      const live = async (): Promise<number> => (await metrics())['velo_streaming_mux_live_slots'] ?? -1;
      for (let t = 0; (await live()) !== 0; t++) {
        if (t > 400) throw new Error('the server kept live slots');
        await new Promise((r) => setTimeout(r, 5));
      }
      expect((await drive(q, 'metrics'))['velo_streaming_mux_live_slots']).toBe(0);
      console.log(`[e2e wt resume] ${sum.tokens} tokens in ${sum.wallMs.toFixed(0)} ms`);
    } finally {
      await drive(q, 'close').catch(() => {});
      await q.close();
    }
  });

  it('2e. a page reload mid-stream re-attaches over WebTransport from its token and completes the text exactly once; a tampered token is refused', {
    timeout: 30_000,
  }, async () => {
    const N = 400;
    const metrics = async (): Promise<Record<string, number>> =>
      (await denoCommand<{ metrics: Record<string, number> }>('metrics')).metrics;
    type Served = Record<string, { accepted: number; outcome: string }>;
    const servedReload = async (): Promise<Served[string]> =>
      (await denoCommand<{ served: Served }>('served wt-reload')).served['wt-reload']!;
    const connectTo = { url: serverUrl, kind: 'wt', certHashHex, resume: {} } as const;
    const q = await env.openPage();
    try {
      await drive(q, 'connect', connectTo);
      // Paced: the reload lands mid-stream; the page saves the token and each rendered token in sessionStorage.
      const id = await drive(q, 'generate', { prompt: 'wt-reload', n: N, delayMs: 15, persist: true });
      await drive(q, 'waitTokens', id, 100, 10_000);
      const reloadAt = performance.now();
      await q.reload();
      await q.waitForFunction(() => typeof (window as unknown as { e2e?: unknown }).e2e === 'object');
      const reloadMs = performance.now() - reloadAt;
      expect(await drive(q, 'domText', id)).toBeNull();
      await drive(q, 'connect', connectTo);
      expect((await servedReload()).outcome).toBe('streaming');

      const refused = await drive(q, 'reattach', 'wt-reload', { tamper: true });
      expect(refused.error?.code).toBe('ERR_ATTACH_REFUSED');
      expect(refused.error?.retryable).toBe(false);

      const t0 = performance.now();
      const re = await drive(q, 'reattach', 'wt-reload');
      expect(re.error).toBeNull();
      expect(re.id).toBe(id);
      expect(re.offset).toBeGreaterThanOrEqual(100);
      expect(re.offset).toBeLessThan(N);
      const r = await drive(q, 'waitEnd', id);
      const doneMs = performance.now() - t0;
      expect(r.end).toBe('finalized');
      expect(r.error).toBeNull();
      // Exactly once, in order: no duplicate at the seam, nothing missing.
      expect(r.orderOk).toBe(true);
      expect(r.tokens).toEqual(expected('wt-reload', N));
      expect(await drive(q, 'domText', id)).toBe(expected('wt-reload', N).join(''));
      expect(await servedReload()).toEqual({ accepted: N, outcome: 'finalized' });
      expect(
        (await metrics())[
          'velo_streaming_anchor_operations_total{operation="reattach",outcome="success",transport_scheme="mux"}'
        ],
      ).toBe(1);
      const live = async (): Promise<number> => (await metrics())['velo_streaming_mux_live_slots'] ?? -1;
      // The re-attach left the reloaded page's slot behind; its close goes to that page's link, which the
      // server may learn is gone only from its mux health check (5 s interval, 5 s deadline) when the old
      // session ended without a close (seen under load: one slot for 3.5 s). Bounded by that, not by 2 s.
      const liveDeadline = performance.now() + 12_000;
      while ((await live()) !== 0) {
        if (performance.now() > liveDeadline) throw new Error('the server kept live slots');
        await new Promise((r) => setTimeout(r, 5));
      }
      expect((await drive(q, 'metrics'))['velo_streaming_mux_live_slots']).toBe(0);
      console.log(
        `[e2e wt reload] reload ${reloadMs.toFixed(0)} ms; re-attached at offset ${re.offset}, rest of ${N} tokens in ${doneMs.toFixed(0)} ms`,
      );
    } finally {
      await drive(q, 'close').catch(() => {});
      await q.close();
    }
  });
  it("2f. the server restarts on the same port with a new certificate: the page (no reload) asks its serverCertificateHashes function again, gets the new hash, reconnects by itself and a new stream completes; the old instance's streams end retryable", {
    timeout: 60_000,
  }, async () => {
    const dirs = [scratchDir('lanemux-e2e-cert-a-'), scratchDir('lanemux-e2e-cert-b-')];
    const hashes = dirs.map((d) => makeCert(d));
    expect(hashes[0]).not.toBe(hashes[1]);
    // The development server's hash endpoint: what the page's serverCertificateHashes function fetches.
    let current = hashes[0]!;
    const hashServer = createServer((_req, res) => {
      res.setHeader('access-control-allow-origin', '*');
      res.setHeader('cache-control', 'no-store');
      res.end(current);
    });
    await new Promise<void>((r) => hashServer.listen(0, '127.0.0.1', () => r()));
    const hashUrl = `http://127.0.0.1:${(hashServer.address() as AddressInfo).port}/cert-hash`;
    let server = await spawnDeno(dirs[0]!, 0, () => {});
    const url = server.url;
    const q = await env.openPage();
    try {
      await drive(q, 'connect', {
        url,
        kind: 'wt',
        certHashUrl: hashUrl,
        // Redial soon, and keep at it while the server is down (Chromium names every failed handshake alike).
        transportOptions: {
          minReconnectionDelay: 100,
          reconnectionJitter: 50,
          maxReconnectionDelay: 400,
          maxSameFailures: 1_000,
        },
        resume: { windowMs: 30_000 },
        // A killed server sends nothing: the page's pings find the dead link (QUIC's idle timeout is far longer).
        healthCheck: { intervalMs: 200, timeoutMs: 500 },
      });
      expect(await drive(q, 'certHashCalls')).toEqual([hashes[0]]);
      const ids = await drive(q, 'startMany', 4, { prompt: 'wt-restart', n: 1_000_000, delayMs: 10, render: false });
      for (const id of ids) await drive(q, 'waitTokens', id, 5, 10_000);
      const before = await drive(q, 'linkState');

      // A crash (no close from the server), then the same worker as a new instance: a new certificate, the same port.
      const worker = server.workerId;
      await stopDeno(server.child, 'SIGKILL');
      current = hashes[1]!;
      server = await spawnDeno(dirs[1]!, Number(new URL(url).port), () => {}, worker);
      expect(server.url).toBe(url);
      expect(server.workerId).toBe(worker);

      // The page's own redial gets in: a link to the new instance formed.
      const deadline = performance.now() + 20_000;
      while ((await drive(q, 'linkState')).ups <= before.ups) {
        if (performance.now() > deadline)
          throw new Error(
            `the page did not link to the restarted server within 20 s (hash calls: ${(await drive(q, 'certHashCalls')).join(', ')})`,
          );
        await new Promise((r) => setTimeout(r, 20));
      }
      const calls = await drive(q, 'certHashCalls');
      expect(calls.length).toBeGreaterThan(1);
      expect(calls[0]).toBe(hashes[0]);
      expect(calls.at(-1)).toBe(hashes[1]);

      // The old instance's streams cannot resume on a new one (its replay rings died with it): each ends at once,
      // not after the page's 30 s resume window, retryable, after an exact prefix.
      const ended = await within(
        Promise.all(ids.map((id) => drive(q, 'waitEnd', id))),
        10_000,
        "the old instance's streams ending",
      );
      for (const r of ended) {
        expect(r.end, r.id).toBe('error');
        expect(r.error?.code, r.id).toBe('ERR_SENDER_DROPPED');
        expect(r.error?.retryable, r.id).toBe(true);
        expect(r.error?.reason, r.id).toBe('restarted');
        expect(r.tokens, r.id).toEqual(expected(r.prompt, r.tokens.length));
        expect(r.tokens.length, r.id).toBeGreaterThanOrEqual(5);
      }

      // A new stream on the restarted server completes exactly.
      const id = await drive(q, 'generate', { prompt: 'wt-restarted', n: 20 });
      const r = await within(drive(q, 'waitEnd', id), 15_000, 'a stream on the restarted server ending');
      expect(r.end).toBe('finalized');
      expect(r.tokens).toEqual(expected('wt-restarted', 20));
    } finally {
      await drive(q, 'close').catch(() => {});
      await q.close();
      await stopDeno(server.child);
      await new Promise<void>((r) => hashServer.close(() => r()));
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  });
});
