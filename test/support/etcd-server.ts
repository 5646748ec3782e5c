/**
 * A real etcd (Debian's etcd-server, binary `etcd`) for a test file: one member on free loopback
 * ports, its data in a scratch directory under the checkout; `restart()` keeps the ports and data.
 */
import { rmSync } from 'node:fs';
import { findBinary, requireBinary, serverProcess, startOnFreePorts, type ServerProcess } from './server-process.ts';
import { scratchDir } from './scratch.ts';

const SPEC = {
  name: 'etcd',
  binary: findBinary('etcd', ['/usr/sbin/etcd', '/usr/bin/etcd']),
  install: 'apt-get install -y etcd-server',
} as const;

export interface EtcdServer {
  /** `127.0.0.1:<client port>`: what `etcd3` takes as a host. */
  readonly host: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stop and start again on the same port with the same data. */
  restart(): Promise<void>;
  /** Stop and remove the data. */
  close(): Promise<void>;
}

/** Start etcd; fails (does not skip) when the binary is missing. */
export async function startEtcd(): Promise<EtcdServer> {
  requireBinary(SPEC);
  let dir = '';
  const { proc, client } = await startOnFreePorts(2, ([client, peer]) => {
    // A fresh data directory per attempt: one that a start left behind names the old peer URL.
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    dir = scratchDir('etcd-');
    const clientUrl = `http://127.0.0.1:${client!}`;
    const peerUrl = `http://127.0.0.1:${peer!}`;
    const proc: ServerProcess = serverProcess({
      ...SPEC,
      args: [
        '--name',
        'lanemux-test',
        '--data-dir',
        dir,
        '--listen-client-urls',
        clientUrl,
        '--advertise-client-urls',
        clientUrl,
        '--listen-peer-urls',
        peerUrl,
        '--initial-advertise-peer-urls',
        peerUrl,
        '--initial-cluster',
        `lanemux-test=${peerUrl}`,
        '--logger',
        'zap',
        '--log-outputs',
        'stderr',
      ],
      // 3.4 with the zap logger says this once it serves clients.
      ready: /serving client traffic|ready to serve client requests/,
    });
    return { proc, value: { proc, client: client! } };
  });
  return {
    host: `127.0.0.1:${client}`,
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
