/**
 * A server binary run by a test (etcd, nats-server): started on loopback with its data under the
 * checkout's `.scratch/`, ready when its log says so, stopped (and restartable on the same port and
 * data) by the test. A missing binary fails with how to install it: CI installs it, a suite never skips.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

/** A loopback TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Attempts {@link startOnFreePorts} makes before it gives up. */
const PORT_ATTEMPTS = 3;

/**
 * Start a server on `count` ports `freePort()` found. Such a port is free when it is found, not
 * when the server binds it: another process (any outgoing connection takes an ephemeral port) may
 * take it in between. A start that fails because its port was taken tries again with new ports,
 * up to {@link PORT_ATTEMPTS} times; any other failure is thrown at once.
 */
export async function startOnFreePorts<T>(
  count: number,
  make: (ports: number[]) => { proc: ServerProcess; value: T },
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) ports.push(await freePort());
    const { proc, value } = make(ports);
    try {
      await proc.start();
      return value;
    } catch (e) {
      if (attempt >= PORT_ATTEMPTS || !/address already in use/i.test(proc.log())) throw e;
    }
  }
}

/** What to run and how to tell it is ready. */
export interface ServerSpec {
  /** Name in messages, e.g. `etcd`. */
  readonly name: string;
  readonly binary: string;
  readonly args: readonly string[];
  /** A log line (stdout or stderr) that means the server serves clients. */
  readonly ready: RegExp;
  /** How to install the binary, for the failure message. */
  readonly install: string;
}

/** A server process that can be started and stopped again. */
export interface ServerProcess {
  start(): Promise<void>;
  /** Stop it (SIGTERM, then SIGKILL after 10 s) and wait for it to exit. */
  stop(): Promise<void>;
  /** The last lines of its log, for failure messages. */
  log(): string;
}

const LOG_TAIL = 16 * 1024;
const START_TIMEOUT_MS = 30_000;
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * `name` if it runs from the PATH, else the first of `paths` that exists (Debian puts nats-server
 * in /usr/sbin, which a non-root PATH may lack), else `name` (and `requireBinary` then says so).
 */
export function findBinary(name: string, paths: readonly string[]): string {
  const r = spawnSync(name, ['--version'], { stdio: 'ignore' });
  if (r.error === undefined) return name;
  return paths.find((p) => existsSync(p)) ?? name;
}

/** Fail clearly unless `spec.binary` runs. */
export function requireBinary(spec: Pick<ServerSpec, 'name' | 'binary' | 'install'>): void {
  const r = spawnSync(spec.binary, ['--version'], { stdio: 'ignore' });
  if (r.error !== undefined || r.status !== 0)
    throw new Error(
      `${spec.name}: the binary '${spec.binary}' is missing or broken (${r.error?.message ?? `exit ${r.status}`}); ` +
        `install it with: ${spec.install} (.ci/run installs it)`,
    );
}

export function serverProcess(spec: ServerSpec): ServerProcess {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let log = '';
  const append = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-LOG_TAIL);
  };
  return {
    log: () => log,
    start() {
      requireBinary(spec);
      log = '';
      const c = spawn(spec.binary, [...spec.args], { stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      live.add(c);
      exited = new Promise((resolve) => c.once('exit', () => resolve()));
      void exited.then(() => live.delete(c));
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          c.kill('SIGKILL');
          reject(new Error(`${spec.name} was not ready within ${START_TIMEOUT_MS} ms:\n${log}`));
        }, START_TIMEOUT_MS);
        const onData = (chunk: Buffer): void => {
          append(chunk);
          if (spec.ready.test(log)) {
            clearTimeout(timer);
            resolve();
          }
        };
        c.stdout!.on('data', onData);
        c.stderr!.on('data', onData);
        c.once('error', (e) => {
          clearTimeout(timer);
          reject(new Error(`${spec.name} could not start: ${e.message}; install it with: ${spec.install}`));
        });
        c.once('exit', (code, signal) => {
          clearTimeout(timer);
          reject(new Error(`${spec.name} exited (${signal ?? code}) before it was ready:\n${log}`));
        });
      });
    },
    async stop() {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const force = setTimeout(() => c.kill('SIGKILL'), 10_000);
      c.kill('SIGTERM');
      await exited;
      clearTimeout(force);
    },
  };
}
