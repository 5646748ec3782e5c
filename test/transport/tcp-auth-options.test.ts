// The TCP adapter's own `credential` (dial side) and `authenticate` (listen side): exposed as given,
// validated at creation, and used by the transport core over plain TCP and TLS alike.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import type { AuthRequest } from '../../src/transport/auth.ts';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';

const open: Messenger[] = [];
afterEach(async () => {
  for (const m of open.splice(0)) await m.close();
});

describe('tcpTransport: credential and authenticate', () => {
  it('exposes credential and authenticate exactly as given, and undefined by default', () => {
    const authenticate = (): string => 'x';
    const credential = (): string => 'tok';
    const a = tcpTransport({ authenticate, credential });
    expect(a.authenticate).toBe(authenticate);
    expect(a.credential).toBe(credential);
    expect(tcpTransport({ credential: 'fixed' }).credential).toBe('fixed');
    const plain = tcpTransport();
    expect(plain.authenticate).toBeUndefined();
    expect(plain.credential).toBeUndefined();
  });

  it('refuses a credential over 8 KiB or of another type, and an authenticate that is not a function, with ERR_INVALID_CONFIG', () => {
    expect(() => tcpTransport({ credential: 'x'.repeat(8193) })).toThrow(
      /invalid options for tcpTransport: .*credential/s,
    );
    expect(() => tcpTransport({ credential: 42 as never })).toThrow(/credential/);
    expect(() => tcpTransport({ authenticate: 'yes' as never })).toThrow(
      /invalid options for tcpTransport: .*authenticate/s,
    );
  });

  it("over TLS, the listener's authenticate sees the dialler adapter's credential and transport 'tls', and the link gets the identity it returned", async () => {
    const cert = await createDevCertificate();
    const seen: AuthRequest[] = [];
    const server = await createMessenger({
      transports: [
        tcpTransport({
          port: 0,
          tls: { key: cert.keyPem, cert: cert.certPem },
          authenticate: (r) => (seen.push(r), r.credential === 'token-7' ? 'svc-7' : null),
        }),
      ],
      healthCheck: false,
    });
    open.push(server);
    const client = await createMessenger({
      transports: [tcpTransport({ listen: false, tls: { ca: cert.certPem }, credential: async () => 'token-7' })],
      healthCheck: false,
    });
    open.push(client);
    await client.connect(server.addresses[0]!);
    expect(server.peers().map((p) => p.identity)).toEqual(['svc-7']);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ transport: 'tls', credential: 'token-7', worker: client.self.id });
    expect(seen[0]!.remote).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
    const refused = await createMessenger({
      transports: [tcpTransport({ listen: false, tls: { ca: cert.certPem }, credential: 'nope' })],
      healthCheck: false,
    });
    open.push(refused);
    await expect(refused.connect(server.addresses[0]!)).rejects.toMatchObject({ code: 'ERR_UNAUTHENTICATED' });
  });
});
