// `authenticate` on the Deno WebTransport server adapter (the shared suite, Deno → Deno). The hook
// sees the session URL (Deno exposes no request headers for WebTransport sessions).
import { describe } from 'vitest';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { webTransportClientTransport } from '../../src/adapters/webtransport.ts';
import { authSuite } from '../transport/auth-suite.ts';

const cert = await createDevCertificate();
const backoff = { minReconnectionDelay: 20, reconnectionJitter: 30, maxReconnectionDelay: 200 };

describe('authenticate on the Deno WebTransport server', () => {
  authSuite({
    name: 'webtransport-server',
    upgrade: false,
    reconnects: true,
    server: (authenticate) =>
      webTransportServerTransport({ cert: cert.certPem, key: cert.keyPem, authenticate, closeGraceMs: 200 }),
    client: (credential) =>
      webTransportClientTransport({
        serverCertificateHashes: [cert.serverCertificateHash],
        credential,
        closeGraceMs: 200,
        ...backoff,
      }),
  });
});
