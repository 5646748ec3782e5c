// Regression (review finding): a peer that completes QUIC (ALPN h3) but never sends the WebTransport
// CONNECT used to hold a `maxSessions` slot forever (accept, upgrade and ready had no deadline), so a
// few silent connections locked every legitimate client out. The handshake now has a deadline
// (`sessionIdleTimeoutMs`) and a failed handshake closes its QUIC connection.
import { describe, expect, it } from 'vitest';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';

declare const Deno: { connectQuic(options: Record<string, unknown>): Promise<{ close(): void }> };

describe('deno webtransport server: handshake deadline', () => {
  it('a silent pre-upgrade QUIC connection does not block later sessions (maxSessions: 1)', async () => {
    const cert = await createDevCertificate();
    const adapter = webTransportServerTransport({
      cert: cert.certPem,
      key: cert.keyPem,
      maxSessions: 1,
      sessionIdleTimeoutMs: 300,
      closeGraceMs: 100,
    });
    const url = (await adapter.listen({
      frameLimit: 4096,
      maxMessageSize: 1 << 20,
      runtime: systemRuntime(),
      accept(c) {
        c.start({ message() {}, closed() {} });
      },
    }))!;
    const u = new URL(url);
    // The attacker: QUIC + ALPN h3, then silence (keep-alives keep QUIC's own idle timeout away).
    const quic = await Deno.connectQuic({
      hostname: u.hostname,
      port: Number(u.port),
      alpnProtocols: ['h3'],
      serverCertificateHashes: [cert.serverCertificateHash],
      keepAliveInterval: 1000,
    });
    try {
      await new Promise((r) => setTimeout(r, 1000));
      const WT = (
        globalThis as unknown as {
          WebTransport: new (
            url: string,
            init: unknown,
          ) => { ready: Promise<void>; closed: Promise<unknown>; close(): void };
        }
      ).WebTransport;
      const wt = new WT(url, { serverCertificateHashes: [cert.serverCertificateHash] });
      wt.closed.catch(() => {});
      const r = await Promise.race([
        wt.ready.then(
          () => 'ready',
          (e: Error) => `failed: ${e.message}`,
        ),
        new Promise((res) => setTimeout(() => res('pending 3 s'), 3000)),
      ]);
      expect(r).toBe('ready');
      wt.close();
    } finally {
      quic.close();
      await adapter.close();
    }
  });
});
