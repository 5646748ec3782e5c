// Half-sent frames over the Deno TCP adapter (the shared suite, test/transport/frame-bounds-suite.ts).
import { describe } from 'vitest';
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { frameBoundsSuite } from '../../transport/frame-bounds-suite.ts';

describe('incomplete frames over Deno TCP', () => {
  frameBoundsSuite({
    name: 'deno-tcp',
    attackers: 100,
    server: () => denoTcpTransport({ port: 0, closeGraceMs: 200 }),
    client: () => denoTcpTransport({ listen: false, closeGraceMs: 200 }),
  });
});
