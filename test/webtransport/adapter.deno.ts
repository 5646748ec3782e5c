// Deno server adapter limits and the one-session-per-link mapping, with raw WebTransport clients
// (Deno's global, --unstable-net). Run through deno-tests.test.ts, or by hand:
//   DENO_NO_UPDATE_CHECK=1 node_modules/.bin/deno test --no-check --unstable-net --allow-net \
//     --allow-read --allow-env test/webtransport/adapter.deno.ts
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { FrameDecoder } from '../../src/transport/frame.ts';
import { decodeGoaway } from '../../src/transport/hello.ts';
import {
  webTransportClientTransport,
  type WebTransportConstructor,
  type WebTransportInit,
  type WebTransportSession,
} from '../../src/adapters/webtransport.ts';
import { within } from '../transport/helpers.ts';

interface RawSession extends WebTransportSession {
  readonly incomingBidirectionalStreams: ReadableStream<unknown>;
}
const NativeWt = (globalThis as unknown as { WebTransport: new (url: string, o?: WebTransportInit) => RawSession })
  .WebTransport;
const cert = await createDevCertificate();
const hashes = [cert.serverCertificateHash];
const open: Messenger[] = [];
const raws: RawSession[] = [];

afterEach(async () => {
  for (const r of raws.splice(0)) {
    try {
      r.close();
    } catch {
      // closed by the server
    }
  }
  await Promise.all(open.splice(0).map((m) => m.close()));
});

async function server(extra: Record<string, unknown> = {}, lanes = 4): Promise<Messenger> {
  const m = await createMessenger({
    transports: [
      webTransportServerTransport({ cert: cert.certPem, key: cert.keyPem, closeGraceMs: 200, ...extra } as never),
    ],
    lanes,
    healthCheck: false,
  });
  open.push(m);
  return m;
}

async function raw(url: string, ready = true): Promise<RawSession> {
  const s = new NativeWt(url, { serverCertificateHashes: hashes });
  s.closed.catch(() => {});
  s.ready.catch(() => {});
  raws.push(s);
  if (ready) await s.ready;
  return s;
}

describe('webtransport adapters (Deno)', () => {
  it('a 4-lane link is one session with one stream per lane; each new link gets a new session', async () => {
    const srv = await server();
    const sessions: string[] = [];
    const Counting = class extends NativeWt {
      constructor(url: string, o?: WebTransportInit) {
        super(url, o);
        sessions.push(url);
      }
    } as unknown as WebTransportConstructor;
    const client = await createMessenger({
      transports: [
        webTransportClientTransport({ WebTransport: Counting, serverCertificateHashes: hashes, closeGraceMs: 200 }),
      ],
      lanes: 4,
      healthCheck: false,
      reconnect: false,
    });
    open.push(client);
    const peer = await client.connect(srv.addresses[0] as string);
    expect(peer.lanes).toBe(4);
    expect(sessions).toEqual([srv.addresses[0]]);
    const got: number[] = [];
    for (let lane = 0; lane < 4; lane++) srv.registerBatchHandler(lane, (_f, l) => got.push(l));
    for (let lane = 0; lane < 4; lane++) {
      const a = client.sendBatch(peer.id, lane, Uint8Array.of(lane + 1));
      if (a !== true) await a;
    }
    await within(
      (async () => {
        while (got.length < 4) await new Promise((r) => setTimeout(r, 5));
      })(),
      2_000,
      'four lanes',
    );
    expect(got.sort()).toEqual([0, 1, 2, 3]);
    client.disconnect(peer.id);
    await client.connect(srv.addresses[0] as string);
    expect(sessions).toHaveLength(2);
  });

  it('closes a session opened at another path, and one that opens no stream within sessionIdleTimeoutMs', async () => {
    const srv = await server({ sessionIdleTimeoutMs: 100 });
    const address = srv.addresses[0] as string;
    // The server may close it before `ready` settles on our side: only the close matters.
    const wrong = await raw(address.replace('/lanemux', '/other'), false);
    await within(
      wrong.closed.then(
        () => 'closed',
        () => 'closed',
      ),
      2_000,
      'wrong path closed',
    );
    const idle = await raw(address);
    const t0 = performance.now();
    await within(
      idle.closed.then(
        () => 'closed',
        () => 'closed',
      ),
      2_000,
      'idle session closed',
    );
    expect(performance.now() - t0).toBeGreaterThanOrEqual(50);
  });

  it('refuses streams beyond maxStreamsPerSession with a GOAWAY saying why', async () => {
    const srv = await server({ maxStreamsPerSession: 2 });
    const s = await raw(srv.addresses[0] as string);
    const streams = [];
    // Each stream must carry bytes for the server to see it: a one-byte frame it will not parse as a HELLO.
    for (let i = 0; i < 3; i++) {
      const st = await s.createBidirectionalStream();
      const w = st.writable.getWriter();
      await w.write(Uint8Array.of(0, 0, 0, 1, 0x55));
      streams.push(st);
    }
    const third = streams[2]!.readable.getReader();
    const messages: Uint8Array[] = [];
    const dec = new FrameDecoder(4096, 'test');
    while (messages.length < 2) {
      const { value, done } = await within(third.read(), 2_000, 'refusal');
      if (done) break;
      dec.push(value, (m) => {
        messages.push(m.slice());
      });
    }
    expect(messages[0]?.[0]).toBe(0xf1);
    expect(decodeGoaway(messages[0] as Uint8Array)).toMatchObject({ code: 'ERR_TOO_MANY_PEERS' });
    expect(messages[1]?.byteLength).toBe(0); // END
  });

  it('rotates certificates: clients holding current + next hashes connect before and after, and live links survive', async () => {
    // Two certificates valid now, as the current and next ones are during the rotation overlap
    // (createCertificateRotation's `next` starts in the future, which clients would refuse today).
    const first = await createDevCertificate({ validityMs: 2 * 24 * 3600_000 });
    const adapter = webTransportServerTransport({ cert: first.certPem, key: first.keyPem, closeGraceMs: 200 });
    const srv = await createMessenger({ transports: [adapter], healthCheck: false });
    open.push(srv);
    const address = srv.addresses[0] as string;
    const second = await createDevCertificate({ validityMs: 2 * 24 * 3600_000 });
    const client = (hs: typeof hashes) =>
      createMessenger({
        transports: [
          webTransportClientTransport({ serverCertificateHashes: hs, connectTimeoutMs: 2_000, closeGraceMs: 200 }),
        ],
        healthCheck: false,
        reconnect: false,
      });
    const both = await client([first.serverCertificateHash, second.serverCertificateHash]);
    open.push(both);
    const live = await both.connect(address);
    adapter.setCertificate({ cert: second.certPem, key: second.keyPem });
    const onlyOld = await client([first.serverCertificateHash]);
    open.push(onlyOld);
    await expect(onlyOld.connect(address, { timeoutMs: 3_000 })).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    const onlyNew = await client([second.serverCertificateHash]);
    open.push(onlyNew);
    await expect(onlyNew.connect(address, { timeoutMs: 3_000 })).resolves.toMatchObject({ id: srv.self.id });
    // The link made before the rotation is still up.
    await expect(both.ping(live.id)).resolves.toBeTypeOf('number');
  });

  it('a server restarted in the same process on the same port takes over the lingering endpoint, even with another certificate', async () => {
    const srv1 = await server({ reuseEndpointWithinMs: 2_000 });
    const address = srv1.addresses[0] as string;
    await srv1.close();
    open.splice(open.indexOf(srv1), 1);
    const other = await createDevCertificate();
    const srv2 = await createMessenger({
      transports: [
        webTransportServerTransport({
          cert: other.certPem,
          key: other.keyPem,
          port: Number(new URL(address).port),
          closeGraceMs: 200,
        }),
      ],
      healthCheck: false,
    });
    open.push(srv2);
    expect(srv2.addresses[0]).toBe(address);
    const client = await createMessenger({
      transports: [
        webTransportClientTransport({ serverCertificateHashes: [other.serverCertificateHash], closeGraceMs: 200 }),
      ],
      healthCheck: false,
    });
    open.push(client);
    await expect(client.connect(address, { timeoutMs: 3_000 })).resolves.toMatchObject({ id: srv2.self.id });
  });
});
