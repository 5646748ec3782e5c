// TLS over the Deno TCP adapter (Deno.listenTls / Deno.connectTls): the shared suite
// (test/transport/tls-suite.ts), and the options Deno cannot honour refused up front.
import { describe, expect, it } from 'vitest';
import { denoTcpTransport } from '../../../src/adapters/deno-tcp.ts';
import { tlsSuite } from '../../transport/tls-suite.ts';

describe('TLS over Deno TCP', () => {
  tlsSuite({
    name: 'deno-tls',
    server: (tls) => denoTcpTransport({ port: 0, tls, closeGraceMs: 200 }),
    client: (tls) => denoTcpTransport({ listen: false, tls, closeGraceMs: 200 }),
    plainClient: () => denoTcpTransport({ listen: false, closeGraceMs: 200 }),
    closesSilentHandshakes: false,
  });

  it('refuses the TLS options Deno.listenTls / Deno.connectTls cannot honour, with ERR_INVALID_CONFIG naming them', () => {
    expect(() => denoTcpTransport({ listen: false, tls: { requestCert: true } })).toThrow(
      /tls\.requestCert is not available on Deno/,
    );
    expect(() => denoTcpTransport({ listen: false, tls: { rejectUnauthorized: false } })).toThrow(
      /tls\.rejectUnauthorized: false is not available on Deno/,
    );
    expect(() => denoTcpTransport({ listen: false, tls: { servername: 'x.test' } })).toThrow(
      /tls\.servername is not available on Deno/,
    );
  });
  it('exposes its own credential and authenticate as given, and dials and prints tls:// only with tls', () => {
    const authenticate = (): string => 'id';
    const a = denoTcpTransport({ listen: false, credential: 'tok', authenticate });
    expect([a.name, a.dialSchemes, a.credential, a.authenticate]).toEqual(['deno-tcp', ['tcp'], 'tok', authenticate]);
    const t = denoTcpTransport({ listen: false, tls: {} });
    expect([t.name, t.dialSchemes, t.credential, t.authenticate]).toEqual(['deno-tls', ['tls'], undefined, undefined]);
    expect(() => denoTcpTransport({ authenticate: 'no' as never })).toThrow(/authenticate/);
  });
});
