/** Start `registrant.ts` in a child Node process; resolves once it has registered `hex`. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { CHECKOUT } from '../support/scratch.ts';
import { sample } from './conformance.ts';

export function spawnRegistrant(
  adapter: 'etcd' | 'nats',
  options: Record<string, unknown>,
  hex: string,
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      join(CHECKOUT, 'test', 'support', 'ts-register.mjs'),
      join(CHECKOUT, 'test', 'discovery', 'registrant.ts'),
      adapter,
      JSON.stringify({ options, registration: sample(hex) }),
    ],
    { cwd: CHECKOUT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the registrant did not register within 20 s:\n${out}`));
    }, 20_000);
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      if (out.includes('registered\n')) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the registrant exited (${signal ?? code}) before registering:\n${out}`));
    });
  });
}
