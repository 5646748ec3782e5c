/**
 * A real NATS server with JetStream (Debian's nats-server) for a test file: a free loopback port,
 * its JetStream store in a scratch directory under the checkout; `restart()` keeps the port and store.
 */
import { rmSync } from 'node:fs';
import { findBinary, requireBinary, serverProcess, startOnFreePorts } from './server-process.ts';
import { scratchDir } from './scratch.ts';

const SPEC = {
  name: 'nats-server',
  binary: findBinary('nats-server', ['/usr/sbin/nats-server', '/usr/bin/nats-server']),
  install: 'apt-get install -y nats-server',
} as const;

export interface NatsServer {
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stop and start again on the same port with the same store. */
  restart(): Promise<void>;
  /** Stop and remove the store. */
  close(): Promise<void>;
}

/** Start nats-server with JetStream; fails (does not skip) when the binary is missing. */
export async function startNats(): Promise<NatsServer> {
  requireBinary(SPEC);
  const dir = scratchDir('nats-');
  const { proc, port } = await startOnFreePorts(1, ([port]) => {
    const proc = serverProcess({
      ...SPEC,
      args: ['-a', '127.0.0.1', '-p', String(port!), '-js', '-sd', dir],
      ready: /Server is ready/,
    });
    return { proc, value: { proc, port: port! } };
  });
  return {
    url: `nats://127.0.0.1:${port}`,
    stop: () => proc.stop(),
    start: () => proc.start(),
    async restart() {
      await proc.stop();
      await proc.start();
    },
    async close() {
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
