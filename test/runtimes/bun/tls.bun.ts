// TLS over the Bun TCP adapter (Bun.listen / Bun.connect with `tls`): the shared suite
// (test/transport/tls-suite.ts).
import { describe, expect, it } from 'vitest';
import { bunTcpTransport } from '../../../src/adapters/bun-tcp.ts';
import { tlsSuite } from '../../transport/tls-suite.ts';

describe('TLS over Bun TCP', () => {
  tlsSuite({
    name: 'bun-tls',
    server: (tls) => bunTcpTransport({ port: 0, tls, closeGraceMs: 200 }),
    client: (tls) => bunTcpTransport({ listen: false, tls, closeGraceMs: 200 }),
    plainClient: () => bunTcpTransport({ listen: false, closeGraceMs: 200 }),
  });
  it('exposes its own credential and authenticate as given, and dials and prints tls:// only with tls', () => {
    const authenticate = (): string => 'id';
    const a = bunTcpTransport({ listen: false, credential: 'tok', authenticate });
    expect([a.name, a.dialSchemes, a.credential, a.authenticate]).toEqual(['bun-tcp', ['tcp'], 'tok', authenticate]);
    const t = bunTcpTransport({ listen: false, tls: {} });
    expect([t.name, t.dialSchemes, t.credential, t.authenticate]).toEqual(['bun-tls', ['tls'], undefined, undefined]);
    expect(() => bunTcpTransport({ authenticate: 'no' as never })).toThrow(/authenticate/);
  });
});
