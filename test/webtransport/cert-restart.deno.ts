// A WebTransport server restarted with a new development certificate (Deno → Deno): a client whose
// serverCertificateHashes is a function gets back in (the function is called again before the
// reconnect); a client whose hashes never match stops reconnecting and its connect rejects with
// ERR_CONNECT naming the certificate, instead of retrying forever unseen (Chromium logs
// QUIC_TLS_CERTIFICATE_UNKNOWN and the application heard nothing). Run through deno.test.ts, or:
//   DENO_NO_UPDATE_CHECK=1 node_modules/.bin/deno test --no-check --unstable-net --allow-net \
//     --allow-read --allow-env test/webtransport/cert-restart.deno.ts
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger, PeerGoneEvent, PeerInfo } from '../../src/messenger/types.ts';
import { createDevCertificate, type DevCertificate } from '../../src/adapters/dev-cert.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import {
  webTransportClientTransport,
  type WebTransportClientTransportOptions,
} from '../../src/adapters/webtransport.ts';
import { within } from '../transport/helpers.ts';

const open: Messenger[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((m) => m.close()));
});

/** Deno 2.9.6 never frees a closed endpoint's port: a restart on the same port takes the lingering endpoint over. */
async function server(cert: DevCertificate, port = 0): Promise<Messenger> {
  const m = await createMessenger({
    transports: [
      webTransportServerTransport({
        cert: cert.certPem,
        key: cert.keyPem,
        port,
        closeGraceMs: 50,
        reuseEndpointWithinMs: 5_000,
      }),
    ],
    healthCheck: false,
  });
  open.push(m);
  return m;
}

async function client(options: WebTransportClientTransportOptions): Promise<Messenger> {
  // Back-off slow enough that the restart (well under a second) is over long before maxSameFailures.
  const m = await createMessenger({
    transports: [
      webTransportClientTransport({
        closeGraceMs: 50,
        minReconnectionDelay: 100,
        reconnectionJitter: 50,
        maxReconnectionDelay: 400,
        ...options,
      }),
    ],
    healthCheck: false,
  });
  open.push(m);
  return m;
}

/** Close `srv` and start a server with `next` on the same port; resolves once the client saw the old link go. */
async function restart(srv: Messenger, c: Messenger, next: DevCertificate): Promise<Messenger> {
  const address = srv.addresses[0] as string;
  const gone = new Promise<PeerGoneEvent>((r) => c.onPeerGone(r));
  await srv.close();
  open.splice(open.indexOf(srv), 1);
  await within(gone, 5_000, 'the client saw the old link go');
  const srv2 = await server(next, Number(new URL(address).port));
  expect(srv2.addresses[0]).toBe(address);
  return srv2;
}

describe('webtransport client: a server restarted with a new development certificate', () => {
  it('serverCertificateHashes as an async function: called again before the reconnect, which gets back in with the new hash', async () => {
    const first = await createDevCertificate();
    const second = await createDevCertificate();
    const srv = await server(first);
    let current = first.serverCertificateHash;
    let calls = 0;
    const c = await client({
      serverCertificateHashes: async () => {
        calls++;
        return [current];
      },
      maxSameFailures: 50,
    });
    const peer = await c.connect(srv.addresses[0] as string);
    expect(peer.id).toBe(srv.self.id);
    expect(calls).toBe(1);
    current = second.serverCertificateHash;
    const srv2 = await restart(srv, c, second);
    const back = await within(
      new Promise<PeerInfo>((r) =>
        c.onPeer((p) => {
          if (p.instanceId === srv2.self.instanceId) r(p);
        }),
      ),
      10_000,
      'the reconnect to the restarted server',
    );
    expect(back.id).toBe(srv2.self.id);
    expect(calls).toBeGreaterThanOrEqual(2);
    await expect(c.ping(back.id)).resolves.toBeTypeOf('number');
  });

  it('a sync function works the same way', async () => {
    const first = await createDevCertificate();
    const second = await createDevCertificate();
    const srv = await server(first);
    let current = [first.serverCertificateHash];
    const c = await client({ serverCertificateHashes: () => current, maxSameFailures: 50 });
    await c.connect(srv.addresses[0] as string);
    current = [second.serverCertificateHash];
    const srv2 = await restart(srv, c, second);
    const back = await within(
      new Promise<PeerInfo>((r) =>
        c.onPeer((p) => {
          if (p.instanceId === srv2.self.instanceId) r(p);
        }),
      ),
      10_000,
      'the reconnect',
    );
    expect(back.id).toBe(srv2.self.id);
  });

  it('fixed hashes that no longer match: the reconnecting dial stops and a connect rejects with a not-retryable ERR_CONNECT naming the certificate', async () => {
    const first = await createDevCertificate();
    const second = await createDevCertificate();
    const srv = await server(first);
    const c = await client({ serverCertificateHashes: [first.serverCertificateHash] });
    await c.connect(srv.addresses[0] as string);
    await restart(srv, c, second);
    const error = await within(
      c.connect(srv.addresses[0] as string, { timeoutMs: 8_000 }).then(
        () => undefined,
        (e: unknown) => e,
      ),
      9_000,
      'the connect to settle',
    );
    expect(error).toMatchObject({ code: 'ERR_CONNECT', retryable: false });
    expect((error as Error).message).toContain("the server's certificate is not accepted");
    expect((error as Error).message).toContain('serverCertificateHashes is a fixed list');
    expect((error as Error).message).not.toContain('no link with');
  });

  it('a function that keeps returning a stale hash: the dial gives up after maxSameFailures certificate refusals and the connect rejects saying so', async () => {
    const first = await createDevCertificate();
    const second = await createDevCertificate();
    const srv = await server(first);
    let calls = 0;
    const c = await client({
      serverCertificateHashes: () => {
        calls++;
        return [first.serverCertificateHash];
      },
      maxSameFailures: 3,
    });
    await c.connect(srv.addresses[0] as string);
    await restart(srv, c, second);
    const error = await within(
      c.connect(srv.addresses[0] as string, { timeoutMs: 8_000 }).then(
        () => undefined,
        (e: unknown) => e,
      ),
      9_000,
      'the connect to settle',
    );
    expect(error).toMatchObject({ code: 'ERR_CONNECT', retryable: false });
    expect((error as Error).message).toContain('returned no matching hash 3 times in a row; giving up');
    expect(calls).toBeGreaterThanOrEqual(1 + 3);
  });

  it('a first connect whose fixed hashes do not match fails at once naming the certificate (not at the connect deadline)', async () => {
    const served = await createDevCertificate();
    const other = await createDevCertificate();
    const srv = await server(served);
    const c = await client({ serverCertificateHashes: [other.serverCertificateHash] });
    const t0 = performance.now();
    const error = await c.connect(srv.addresses[0] as string, { timeoutMs: 8_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(performance.now() - t0).toBeLessThan(4_000);
    expect(error).toMatchObject({ code: 'ERR_CONNECT', retryable: false });
    expect((error as Error).message).toMatch(/certificate is not accepted \(.*UnknownIssuer.*\)/);
  });
});
