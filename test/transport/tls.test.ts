// TLS for links across machines: tcpTransport({ tls }) on node:tls (the shared suite, then the
// Node-only parts: option checks, mutual TLS with a client certificate from openssl), and the Node
// WebSocket server adapter behind wss:// on an https.Server.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { isLanemuxError } from '../../src/errors.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { scratchDir } from '../support/scratch.ts';
import { tlsSuite } from './tls-suite.ts';

describe('TLS over Node TCP', () => {
  tlsSuite({
    name: 'tls',
    server: (tls) => tcpTransport({ port: 0, tls, closeGraceMs: 200 }),
    client: (tls) => tcpTransport({ listen: false, tls, closeGraceMs: 200 }),
    plainClient: () => tcpTransport({ listen: false, closeGraceMs: 200 }),
  });
});

const open: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of open.splice(0).reverse()) await n.close();
});

async function node(...args: Parameters<typeof createNode>): Promise<LanemuxNode> {
  const n = await createNode(...args);
  open.push(n);
  return n;
}

async function tokens(server: LanemuxNode, client: LanemuxNode, n = 200): Promise<void> {
  const anchor = server.createAnchor<string>();
  const read = (async () => {
    const out: string[] = [];
    for await (const t of anchor) out.push(t);
    return out;
  })();
  const s = await client.attachAnchor<string>(anchor.handle);
  for (let i = 0; i < n; i++) await s.send(`t${i}`);
  await s.finalize();
  expect(await read).toEqual(Array.from({ length: n }, (_, i) => `t${i}`));
}

describe('tcpTransport({ tls }): options and addresses', () => {
  it('refuses a TLS listener without a key and certificate, and a key without its certificate, with ERR_INVALID_CONFIG naming them', () => {
    expect(() => tcpTransport({ tls: {} })).toThrow(
      /a TLS listener needs tls\.key and tls\.cert \(or set listen: false to only dial\)/,
    );
    expect(() => tcpTransport({ listen: false, tls: { key: 'k' } })).toThrow(/tls\.key and tls\.cert go together/);
    expect(() => tcpTransport({ listen: false, tls: { handshakeTimeoutMs: 0 } })).toThrow(
      /invalid options for tcpTransport: .*tls\.handshakeTimeoutMs/s,
    );
    const e = (() => {
      try {
        tcpTransport({ tls: { cert: 'c' } });
      } catch (x) {
        return x;
      }
      return undefined;
    })();
    expect(isLanemuxError(e, 'ERR_INVALID_CONFIG')).toBe(true);
  });

  it('dials and prints only tls:// with tls, only tcp:// without, so neither side is reached in the wrong mode', async () => {
    const cert = await createDevCertificate();
    const secure = tcpTransport({ listen: false, tls: { ca: cert.certPem } });
    const plain = tcpTransport({ listen: false });
    expect([secure.name, secure.dialSchemes]).toEqual(['tls', ['tls']]);
    expect([plain.name, plain.dialSchemes]).toEqual(['tcp', ['tcp']]);
    const tlsServer = await node({
      transports: [tcpTransport({ port: 0, tls: { key: cert.keyPem, cert: cert.certPem } })],
    });
    const plainClient = await node({ transports: [plain] });
    await expect(plainClient.connect(tlsServer.address!)).rejects.toMatchObject({ code: 'ERR_UNSUPPORTED_ADDRESS' });
    await secure.close();
  });

  it('mutual TLS: with requestCert the server refuses a dialler without a trusted client certificate and links one with it', async () => {
    const dir = scratchDir('mtls-');
    try {
      // A client certificate (extendedKeyUsage clientAuth, which the dev certificate lacks), from openssl.
      const key = join(dir, 'client.key');
      const crt = join(dir, 'client.crt');
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:P-256',
          '-nodes',
          '-keyout',
          key,
          '-out',
          crt,
          '-days',
          '2',
          '-subj',
          '/CN=lanemux-client',
          '-addext',
          'extendedKeyUsage=clientAuth',
        ],
        { stdio: 'ignore' },
      );
      const client = { key: readFileSync(key), cert: readFileSync(crt) };
      const server = await createDevCertificate();
      const listener = await node({
        transports: [
          tcpTransport({
            port: 0,
            tls: { key: server.keyPem, cert: server.certPem, ca: client.cert, requestCert: true },
            closeGraceMs: 200,
          }),
        ],
      });
      const anonymous = await node({ transports: [tcpTransport({ listen: false, tls: { ca: server.certPem } })] });
      await expect(anonymous.connect(listener.address!)).rejects.toThrow(/certificate required/);
      const known = await node({
        transports: [tcpTransport({ listen: false, tls: { ca: server.certPem, ...client } })],
      });
      await known.connect(listener.address!);
      await tokens(listener, known);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("checks the server name: servername other than the certificate's is refused, the right one is accepted", async () => {
    const cert = await createDevCertificate({ dnsNames: ['lanemux.test'], ipAddresses: [] });
    const server = await node({
      transports: [tcpTransport({ port: 0, tls: { key: cert.keyPem, cert: cert.certPem } })],
    });
    const byIp = await node({ transports: [tcpTransport({ listen: false, tls: { ca: cert.certPem } })] });
    await expect(byIp.connect(server.address!)).rejects.toMatchObject({ code: 'ERR_CONNECT', retryable: false });
    const byName = await node({
      transports: [tcpTransport({ listen: false, tls: { ca: cert.certPem, servername: 'lanemux.test' } })],
    });
    await byName.connect(server.address!);
    await tokens(server, byName, 20);
  });
});

describe('webSocketServerTransport behind wss://', () => {
  it('serves wss:// on an https.Server it is given; the client adapter dials it with a WebSocket that trusts the test certificate', async () => {
    const cert = await createDevCertificate();
    const httpsServer = https.createServer({ key: cert.keyPem, cert: cert.certPem });
    await new Promise<void>((r) => httpsServer.listen(0, '127.0.0.1', () => r()));
    try {
      const server = await node({ transports: [webSocketServerTransport({ server: httpsServer, closeGraceMs: 200 })] });
      // The adapter prints ws:// for any server it is given (see the report); the scheme is the test's to fix.
      const address = server.address!;
      expect(address).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/lanemux$/);
      // Test-only trust: `ws` takes TLS options as its third argument; partysocket passes two.
      class TrustingWebSocket extends WebSocket {
        constructor(url: string, protocols?: string | string[]) {
          super(url, protocols, { ca: cert.certPem });
        }
      }
      const client = await node({ transports: [webSocketClientTransport({ WebSocket: TrustingWebSocket as never })] });
      await client.connect(address);
      await tokens(server, client);
    } finally {
      await Promise.all(
        open
          .splice(0)
          .reverse()
          .map((n) => n.close()),
      );
      await new Promise<void>((r) => httpsServer.close(() => r()));
    }
  });
});
