// Half-sent frames over real Node TCP (the shared suite, frame-bounds-suite.ts), with the victim's
// ArrayBuffer memory printed before, during and after the attack.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { describe } from 'vitest';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { frameBoundsSuite } from './frame-bounds-suite.ts';

// A real collection before each reading, so "after" is what is still referenced, not garbage yet.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/** Full collections a few turns apart: V8 frees ArrayBuffer memory on a background sweeper after one. */
async function gc(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    collect();
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('incomplete frames over Node TCP', () => {
  frameBoundsSuite({
    name: 'tcp',
    attackers: 100,
    server: () => tcpTransport({ port: 0, closeGraceMs: 200 }),
    client: () => tcpTransport({ listen: false, closeGraceMs: 200 }),
    memory: () => process.memoryUsage().arrayBuffers,
    gc,
  });
});
