/** Start `engine-process.ts` in a child Node process; resolves with it and its anchor's handle once it has registered. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { CHECKOUT } from '../support/scratch.ts';

export function spawnEngine(
  adapter: 'etcd' | 'nats',
  options: Record<string, unknown>,
): Promise<{ child: ChildProcess; handle: string }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      join(CHECKOUT, 'test', 'support', 'ts-register.mjs'),
      join(CHECKOUT, 'test', 'discovery', 'engine-process.ts'),
      adapter,
      JSON.stringify(options),
    ],
    { cwd: CHECKOUT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the engine did not register within 20 s:\n${out}`));
    }, 20_000);
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      const m = /handle (lmx1\.[0-9a-f]{32})\n/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ child, handle: m[1]! });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the engine exited (${signal ?? code}) before registering:\n${out}`));
    });
  });
}
