// Adapters, the messenger and the dial path report configuration mistakes as the one ConfigError
// (`ERR_INVALID_CONFIG`, naming the fields), and a busy port as its own retryable
// `ERR_ADDRESS_IN_USE` naming host and port, on every listener.
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, isLanemuxError } from '../../src/errors.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createCertificateRotation, createDevCertificate } from '../../src/adapters/dev-cert.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import type { ListenHost, TransportAdapter } from '../../src/transport/port.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';

const host: ListenHost = {
  frameLimit: 4096,
  maxMessageSize: 1 << 20,
  accept: (c) => c.close(new TransportError('ERR_CLOSED', 'unused'), 'abort'),
  runtime: systemRuntime(),
};

const adapters: TransportAdapter[] = [];
const messengers: Messenger[] = [];
afterEach(async () => {
  await Promise.all(messengers.splice(0).map((m) => m.close()));
  await Promise.all(adapters.splice(0).map((a) => a.close()));
});

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('resolved');
    },
    (e: unknown) => e,
  );
}

describe('configuration errors of adapters and the messenger', () => {
  it('adapter options: a ConfigError (ERR_INVALID_CONFIG) naming every bad field', () => {
    const tcp = thrown(() => tcpTransport({ port: -1, connectTimeoutMs: 0 })) as ConfigError;
    expect(tcp).toBeInstanceOf(ConfigError);
    expect(tcp.code).toBe('ERR_INVALID_CONFIG');
    expect([...tcp.fields].sort()).toEqual(['connectTimeoutMs', 'port']);
    expect(tcp.message).toContain('tcpTransport');
    const tls = thrown(() => tcpTransport({ tls: { cert: 'c' } })) as ConfigError;
    expect(tls).toBeInstanceOf(ConfigError);
    expect([...tls.fields].sort()).toEqual(['tls.cert', 'tls.key']);
    expect(thrown(() => webSocketServerTransport({ path: 'no-slash' }))).toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'path',
    });
    expect(thrown(() => memoryTransport({ name: 'a b' }))).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'name' });
  });

  it('a WebSocket client without a WebSocket constructor is a ConfigError naming the option', () => {
    const g = globalThis as { WebSocket?: unknown };
    const saved = g.WebSocket;
    delete g.WebSocket;
    try {
      const e = thrown(() => webSocketClientTransport());
      expect(e).toBeInstanceOf(ConfigError);
      expect(e).toMatchObject({ field: 'WebSocket' });
    } finally {
      if (saved !== undefined) g.WebSocket = saved;
    }
  });

  it('createMessenger: bad options are a ConfigError naming them', async () => {
    const e = (await rejection(
      createMessenger({ transports: [memoryTransport({ network: createMemoryNetwork() })], lanes: 17, maxPeers: 0 }),
    )) as ConfigError;
    expect(e).toBeInstanceOf(ConfigError);
    expect([...e.fields].sort()).toEqual(['lanes', 'maxPeers']);
    expect(await rejection(createMessenger({ transports: [] }))).toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'transports',
    });
  });

  it('dev certificates: out-of-range validity, bad names and a bad overlap are ConfigErrors naming the option', async () => {
    expect(await rejection(createDevCertificate({ validityMs: 0 }))).toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'validityMs',
    });
    expect(await rejection(createDevCertificate({ ipAddresses: ['300.1.1.1'] }))).toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'ipAddresses',
    });
    expect(await rejection(createDevCertificate({ dnsNames: ['bad name'] }))).toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'dnsNames',
    });
    const overlap = await rejection(createCertificateRotation({ validityMs: 1000, overlapMs: 1000 }));
    expect(overlap).toBeInstanceOf(ConfigError);
    expect(overlap).toMatchObject({ field: 'overlapMs' });
  });

  it('a credential function that returns something other than a short string fails the connect with a ConfigError', async () => {
    const network = createMemoryNetwork();
    const server = await createMessenger({
      transports: [memoryTransport({ network, name: 'cred-server' })],
      healthCheck: false,
    });
    messengers.push(server);
    const client = await createMessenger({
      transports: [memoryTransport({ network, listen: false, credential: () => 42 as never })],
      healthCheck: false,
    });
    messengers.push(client);
    const e = await rejection(client.connect('memory://cred-server'));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'credential' });
  });
});

describe('a busy port is ERR_ADDRESS_IN_USE, retryable, naming host and port', () => {
  async function busyPort(): Promise<number> {
    const first = tcpTransport({ port: 0 });
    adapters.push(first);
    return Number(new URL((await first.listen(host)) as string).port);
  }

  it('tcpTransport and webSocketServerTransport on a port already taken', async () => {
    const port = await busyPort();
    for (const second of [tcpTransport({ port }), webSocketServerTransport({ port })]) {
      adapters.push(second);
      const e = await rejection(second.listen(host));
      expect(e).toBeInstanceOf(TransportError);
      expect(e).toMatchObject({ code: 'ERR_ADDRESS_IN_USE', retryable: true });
      expect((e as Error).message).toContain(`127.0.0.1:${port}`);
    }
  });

  it('createMessenger over a busy port rejects with it (and releases what it opened)', async () => {
    const port = await busyPort();
    const e = await rejection(createMessenger({ transports: [tcpTransport({ port })] }));
    expect(isLanemuxError(e, 'ERR_ADDRESS_IN_USE')).toBe(true);
  });

  it('a memory name already listening on the network', async () => {
    const network = createMemoryNetwork();
    const first = memoryTransport({ network, name: 'taken' });
    adapters.push(first);
    await first.listen(host);
    const second = memoryTransport({ network, name: 'taken' });
    adapters.push(second);
    const e = await rejection(second.listen(host));
    expect(e).toMatchObject({ code: 'ERR_ADDRESS_IN_USE', retryable: true });
    expect((e as Error).message).toContain('memory://taken');
  });

  it('other listen failures are a clear ConfigError naming host and port, never a raw socket error', async () => {
    // 192.0.2.1 (TEST-NET-1) is on no local interface: EADDRNOTAVAIL.
    const tcp = tcpTransport({ host: '192.0.2.1', port: 0 });
    adapters.push(tcp);
    const e = await rejection(tcp.listen(host));
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toContain('192.0.2.1:0');
  });

  it('webSocketServerTransport on an HTTP server that is not listening is a ConfigError naming `server`', async () => {
    const server = createServer();
    const ws = webSocketServerTransport({ server });
    adapters.push(ws);
    expect(await rejection(ws.listen(host))).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'server' });
    void WebSocket;
  });
});
