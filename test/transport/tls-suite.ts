// TLS on the TCP adapters (`tls://host:port`), one behavioural suite run against each runtime's:
// Node's under vitest (tls.test.ts), Deno's and Bun's under deno test / bun test
// (test/runtimes/*/tls.*.ts). Certificates come from createDevCertificate (WebCrypto, no files).
import net from 'node:net';
import { expect, it } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { createDevCertificate, type DevCertificate } from '../../src/adapters/dev-cert.ts';
import type { ListenHost, TransportAdapter } from '../../src/transport/port.ts';
import type { SocketTlsOptions } from '../../src/adapters/socket-options.ts';

export interface TlsHarness {
  /** The adapter's name with TLS (`tls`, `deno-tls`, `bun-tls`). */
  readonly name: string;
  /** A TLS adapter of this runtime listening on a free loopback port. */
  server(tls: SocketTlsOptions): TransportAdapter;
  /** A TLS adapter of this runtime that only dials. */
  client(tls: SocketTlsOptions): TransportAdapter;
  /** A plain TCP adapter of this runtime that only dials. */
  plainClient(): TransportAdapter;
  /**
   * Whether the runtime lets the adapter close a connection that never sends its ClientHello. False
   * on Deno: `TlsConn.close()` first waits for the handshake (denoland/deno#14547), so such a
   * connection is only ever kept from becoming a lane connection. Defaults to true.
   */
  readonly closesSilentHandshakes?: boolean;
}

export function tlsSuite(h: TlsHarness): void {
  const open: LanemuxNode[] = [];
  let certs: Promise<[DevCertificate, DevCertificate]> | undefined;
  /** The server's certificate, and another one (a CA the server's certificate is not from). */
  const pair = (): Promise<[DevCertificate, DevCertificate]> =>
    (certs ??= Promise.all([createDevCertificate(), createDevCertificate()]));
  const node = async (adapter: TransportAdapter): Promise<LanemuxNode> => {
    const n = await createNode({ transports: [adapter], lanes: 4 });
    open.push(n);
    return n;
  };
  const closeAll = async (): Promise<void> => {
    for (const n of open.splice(0).reverse()) await n.close();
  };

  async function streamTokens(server: LanemuxNode, client: LanemuxNode): Promise<void> {
    const anchors = [0, 1, 2].map(() => server.createAnchor<string>());
    const reads = anchors.map(async (a) => {
      const out: string[] = [];
      for await (const t of a) out.push(t);
      return out;
    });
    await Promise.all(
      anchors.map(async (a, k) => {
        const s = await client.attachAnchor<string>(a.handle);
        for (let i = 0; i < 300; i++) await s.send(`s${k}-t${i}`);
        await s.finalize();
      }),
    );
    const got = await Promise.all(reads);
    expect(got).toEqual([0, 1, 2].map((k) => Array.from({ length: 300 }, (_, i) => `s${k}-t${i}`)));
  }

  it(`${h.name}: a TLS link (tls://) carries streams of tokens end to end on 4 lanes, exact`, async () => {
    try {
      const [cert] = await pair();
      const server = await node(h.server({ key: cert.keyPem, cert: cert.certPem }));
      expect(server.address).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
      const client = await node(h.client({ ca: cert.certPem }));
      await client.connect(server.address!);
      await streamTokens(server, client);
    } finally {
      await closeAll();
    }
  });

  it(`${h.name}: a dialler that does not trust the server's certificate is refused with a non-retryable ERR_CONNECT naming the certificate; the server keeps serving`, async () => {
    try {
      const [cert, other] = await pair();
      const server = await node(h.server({ key: cert.keyPem, cert: cert.certPem }));
      const wrong = await node(h.client({ ca: other.certPem }));
      const error = await wrong.connect(server.address!).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isLanemuxError(error, 'ERR_CONNECT')).toBe(true);
      expect((error as Error).message).toMatch(
        /tls connect to tls:\/\/127\.0\.0\.1:\d+: the server's certificate was refused \(.+\); check tls\.ca and tls\.servername/,
      );
      expect((error as { retryable: boolean }).retryable).toBe(false);
      const right = await node(h.client({ ca: cert.certPem }));
      await right.connect(server.address!);
      await streamTokens(server, right);
    } finally {
      await closeAll();
    }
  });

  it(`${h.name}: a plaintext dialler on the TLS port gets no link, and the listener keeps serving`, async () => {
    try {
      const [cert] = await pair();
      const server = await node(h.server({ key: cert.keyPem, cert: cert.certPem }));
      const plain = await node(h.plainClient());
      await expect(plain.connect(server.address!.replace(/^tls:/, 'tcp:'))).rejects.toBeInstanceOf(Error);
      const right = await node(h.client({ ca: cert.certPem }));
      await right.connect(server.address!);
      await streamTokens(server, right);
    } finally {
      await closeAll();
    }
  });

  it(`${h.name}: closing a TLS listener does not wait for a connection that never started its handshake`, async () => {
    const [cert] = await pair();
    const adapter = h.server({ key: cert.keyPem, cert: cert.certPem });
    const accepted: string[] = [];
    const host: ListenHost = {
      frameLimit: 16 * 1024,
      maxMessageSize: 1 << 20,
      accept: (c) => (accepted.push(c.remote), c.close(new TransportError('ERR_CLOSED', 'unused'), 'abort')),
      runtime: systemRuntime(),
    };
    const address = (await adapter.listen(host)) as string;
    const u = new URL(address);
    const raw = net.connect({ host: u.hostname, port: Number(u.port) });
    raw.on('error', () => {});
    try {
      await new Promise<void>((r) => raw.once('connect', () => r()));
      const t0 = Date.now();
      // The default handshake timeout is 10 s: closing must not wait for it.
      await adapter.close();
      expect(Date.now() - t0).toBeLessThan(3_000);
      expect(accepted).toEqual([]);
    } finally {
      raw.destroy();
    }
  });

  const closesSilent = h.closesSilentHandshakes ?? true;
  it(`${h.name}: a connection that does not finish its TLS handshake within handshakeTimeoutMs ${closesSilent ? 'is dropped' : 'never becomes a lane connection'}`, async () => {
    const [cert] = await pair();
    const adapter = h.server({ key: cert.keyPem, cert: cert.certPem, handshakeTimeoutMs: 300 });
    const accepted: string[] = [];
    const host: ListenHost = {
      frameLimit: 16 * 1024,
      maxMessageSize: 1 << 20,
      accept: (c) => (accepted.push(c.remote), c.close(new TransportError('ERR_CLOSED', 'unused'), 'abort')),
      runtime: systemRuntime(),
    };
    const address = (await adapter.listen(host)) as string;
    const u = new URL(address);
    const raw = net.connect({ host: u.hostname, port: Number(u.port) });
    raw.on('error', () => {});
    try {
      const t0 = Date.now();
      const closed = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), closesSilent ? 5_000 : 1_000);
        raw.once('close', () => {
          clearTimeout(t);
          resolve(true);
        });
      });
      expect(closed).toBe(closesSilent);
      if (closesSilent) expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
      expect(accepted).toEqual([]);
    } finally {
      raw.destroy();
      await adapter.close();
    }
  });
}
