// The `authenticate` hook and the dialler's credential, one behavioural suite run against every
// server adapter: under vitest for Node (TCP, ws-server, memory) and under deno test / bun test for
// the Deno and Bun adapters (test/runtimes/*/auth.*.ts).
import { expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import type { AuthRequest, Authenticate, CredentialSource } from '../../src/transport/auth.ts';
import type { TransportAdapter } from '../../src/transport/port.ts';

export interface AuthHarness {
  /** Adapter name as the hook sees it (`AuthRequest.transport`). */
  readonly name: string;
  /** A server adapter with this `authenticate`. */
  server(authenticate: Authenticate): TransportAdapter;
  /** A dialling adapter presenting this credential. */
  client(credential: CredentialSource): TransportAdapter;
  /** The server adapter sees an upgrade request (WebSocket): its URL and headers reach the hook. */
  readonly upgrade: boolean;
  /** The client reconnects by itself after a lost connection (partysocket). */
  readonly reconnects: boolean;
}

async function waitUntil(pred: () => boolean, what: string, ms = 5_000): Promise<void> {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function authSuite(h: AuthHarness): void {
  const open: Messenger[] = [];
  const node = async (adapter: TransportAdapter): Promise<Messenger> => {
    const m = await createMessenger({ transports: [adapter], healthCheck: false });
    open.push(m);
    return m;
  };
  const closeAll = async (): Promise<void> => {
    for (const m of open.splice(0)) await m.close();
  };

  it(`${h.name}: an accepted peer links with the identity the hook returned; the hook saw the credential${h.upgrade ? ' and the upgrade request' : ''}`, async () => {
    try {
      const seen: AuthRequest[] = [];
      const server = await node(h.server((req) => (seen.push(req), req.credential === 'token-1' ? 'alice' : null)));
      server.handle('whoami', (from) => server.peer(from)?.identity ?? 'none');
      const client = await node(h.client('token-1'));
      const peer = await client.connect(server.addresses[0]!);
      expect(await client.request(peer.id, 'whoami', null)).toBe('alice');
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ transport: h.name, credential: 'token-1', worker: client.self.id });
      if (h.upgrade) {
        expect(seen[0]!.request?.url).toMatch(/\/lanemux/);
        expect(typeof seen[0]!.request?.headers['host']).toBe('string');
      }
    } finally {
      await closeAll();
    }
  });

  it(`${h.name}: a refused peer gets ERR_UNAUTHENTICATED (not retryable, no reconnect loop) and an authenticated link beside it is untouched`, async () => {
    try {
      let calls = 0;
      const server = await node(h.server(async (req) => (calls++, req.credential === 'good' ? 'svc' : undefined)));
      server.handle('echo', (_from, body) => body);
      const good = await node(h.client('good'));
      const goodPeer = await good.connect(server.addresses[0]!);
      const bad = await node(h.client('bad'));
      const e = await bad.connect(server.addresses[0]!, { timeoutMs: 5_000 }).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toMatchObject({ code: 'ERR_UNAUTHENTICATED', retryable: false });
      const callsAfterRefusal = calls;
      expect(await good.request(goodPeer.id, 'echo', 'still here')).toBe('still here');
      expect(server.stats().refused.unauthenticated).toBe(1);
      // A refused dial is not retried: the hook is not called again.
      await good.request(goodPeer.id, 'echo', 'later');
      expect(calls).toBe(callsAfterRefusal);
      expect(server.peers().map((p) => p.identity)).toEqual(['svc']);
    } finally {
      await closeAll();
    }
  });

  it(`${h.name}: a throwing hook refuses; a credential function is called on every connect${h.reconnects ? ' and reconnect, so a refreshed token is what the server sees' : ''}`, async () => {
    try {
      const thrower = await node(
        h.server(() => {
          throw new Error('database down');
        }),
      );
      const c0 = await node(h.client('x'));
      await expect(c0.connect(thrower.addresses[0]!, { timeoutMs: 5_000 })).rejects.toMatchObject({
        code: 'ERR_UNAUTHENTICATED',
      });

      const tokens: string[] = [];
      const server = await node(
        h.server(
          (req) => (
            tokens.push(req.credential ?? ''),
            req.credential?.startsWith('t') === true ? `user-${req.credential}` : null
          ),
        ),
      );
      let n = 0;
      const client = await node(h.client(async () => `t${++n}`));
      const peer = await client.connect(server.addresses[0]!);
      expect(tokens).toEqual(['t1']);
      if (h.reconnects) {
        // Cut the link from the server side: the client reconnects by itself with a fresh token.
        server.disconnect(client.self.id, 'cut');
        await waitUntil(() => tokens.length === 2 && server.peers().length === 1, 'reconnect with a fresh token');
        expect(tokens).toEqual(['t1', 't2']);
        expect(server.peers()[0]!.identity).toBe('user-t2');
      } else {
        client.disconnect(peer.id, 'again');
        await waitUntil(() => server.peers().length === 0, 'link gone');
        await client.connect(server.addresses[0]!);
        expect(tokens).toEqual(['t1', 't2']);
      }
    } finally {
      await closeAll();
    }
  });
}
