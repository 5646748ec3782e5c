/**
 * The discovery suites start real etcd and nats-server processes on ports `freePort()` found; such a
 * port can be taken by another process before the server binds it. A start that fails for that
 * reason tries again on new ports, so a busy machine cannot fail a suite that way.
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { findBinary, requireBinary, serverProcess, startOnFreePorts } from '../support/server-process.ts';

const NATS = {
  name: 'nats-server',
  binary: findBinary('nats-server', ['/usr/sbin/nats-server', '/usr/bin/nats-server']),
  install: 'apt-get install -y nats-server',
} as const;

/** A port held by this process until the test ends. */
async function heldPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { port: address.port, server };
}

describe('servers on free ports', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it('a server whose port was taken before it bound it starts again on new ports', async () => {
    requireBinary(NATS);
    const held = await heldPort();
    cleanup.push(() => new Promise<void>((resolve) => held.server.close(() => resolve())));
    const tried: number[] = [];
    const started = await startOnFreePorts(1, ([port]) => {
      // The first attempt gets the port another process holds, as a race would leave it.
      const use = tried.length === 0 ? held.port : port!;
      tried.push(use);
      const proc = serverProcess({ ...NATS, args: ['-a', '127.0.0.1', '-p', String(use)], ready: /Server is ready/ });
      return { proc, value: { proc, port: use } };
    });
    cleanup.push(() => started.proc.stop());
    expect(tried).toHaveLength(2);
    expect(tried[0]).toBe(held.port);
    expect(started.port).not.toBe(held.port);
  });

  it('a start that fails for another reason is not tried again', async () => {
    requireBinary(NATS);
    let attempts = 0;
    await expect(
      startOnFreePorts(1, ([port]) => {
        attempts++;
        const proc = serverProcess({
          ...NATS,
          args: ['-p', String(port!), '--no-such-flag'],
          ready: /Server is ready/,
        });
        return { proc, value: proc };
      }),
    ).rejects.toThrow(/exited/);
    expect(attempts).toBe(1);
  });
});
