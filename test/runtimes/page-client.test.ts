// lanemux/client in Deno and Bun (their own global WebSocket, no `ws`): each runs test/runtimes/page-client.ts
// against a Node server and gets 16 concurrent calls exact and in order.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { CHECKOUT } from '../support/scratch.ts';
import { bunBinary, denoBinary } from '../support/runtime-binaries.ts';

let server: LanemuxNode;
beforeAll(async () => {
  server = await createNode({ transports: [webSocketServerTransport({ port: 0 })] });
  server.serve<{ id: number; n: number }, string>('count', async ({ id, n }, sender) => {
    for (let i = 0; i < n; i++) await sender.send(`${id}:${i}`);
  });
});
afterAll(() => server.close());

function run(cmd: string, args: string[]): Promise<{ runtime: string; streams: string[][] }> {
  const child = spawn(cmd, args, { cwd: CHECKOUT, env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (code !== 0 || line === undefined) reject(new Error(`${cmd} exited ${code}\n${err}`));
      else resolve(JSON.parse(line));
    });
  });
}

const expected = Array.from({ length: 16 }, (_, id) => Array.from({ length: 200 }, (_, i) => `${id}:${i}`));

describe('lanemux/client on Deno and Bun', () => {
  it('Deno: 16 concurrent calls to a Node server arrive exact and in order', async () => {
    const r = await run(denoBinary(), [
      'run',
      '--cached-only',
      '--no-check',
      '--allow-net',
      '--allow-read',
      '--allow-env',
      'test/runtimes/page-client.ts',
      server.address,
    ]);
    expect(r.runtime).toBe('deno');
    expect(r.streams).toEqual(expected);
  });

  it('Bun: 16 concurrent calls to a Node server arrive exact and in order', async () => {
    const r = await run(bunBinary(), ['run', 'test/runtimes/page-client.ts', server.address]);
    expect(r.runtime).toBe('bun');
    expect(r.streams).toEqual(expected);
  });
});
