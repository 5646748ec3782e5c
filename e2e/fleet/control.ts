/**
 * The fleet test's side of its processes: bundle fleet-node.ts once (vite, Node target, packages
 * external) so each child starts in well under a second instead of transpiling the sources, spawn
 * a role, and talk to it over stdin/stdout JSON lines: `{id, cmd, args}` → `{id, ok, value|error}`,
 * plus `{event, …}` lines the child prints unasked.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { CHECKOUT, scratchDir } from '../../test/support/scratch.ts';

/** Bundle the child entry into a scratch dir under the checkout (so node_modules resolves); returns its path. */
export async function bundleFleetNode(): Promise<string> {
  const outDir = scratchDir('lanemux-fleet-');
  await build({
    configFile: false,
    logLevel: 'warn',
    build: {
      ssr: fileURLToPath(new URL('./fleet-node.ts', import.meta.url)),
      outDir,
      emptyOutDir: true,
      minify: false,
      target: 'node20',
      sourcemap: false,
      reportCompressedSize: false,
      rollupOptions: { output: { entryFileNames: 'fleet-node.mjs', format: 'es' } },
    },
  });
  return join(outDir, 'fleet-node.mjs');
}

/** The `ready` line of a child. */
export interface Ready {
  readonly workerId: string;
  /** TCP listen address (engine, frontend). */
  readonly address?: string;
  /** WebSocket URL (frontend). */
  readonly ws?: string;
}

type Line = { id?: number; ok?: boolean; value?: unknown; error?: { code: string; message: string }; event?: string };

/** A running child of the fleet. */
export class FleetChild {
  readonly role: string;
  readonly proc: ChildProcess;
  readonly ready: Promise<Ready>;
  readonly exited: Promise<void>;
  /** Every event line so far. */
  readonly events: Array<Record<string, unknown>> = [];
  #id = 0;
  readonly #calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #waiters: Array<{
    match: (e: Record<string, unknown>) => boolean;
    resolve: (e: Record<string, unknown>) => void;
  }> = [];
  #stderr = '';

  constructor(entry: string, role: string, config: Record<string, unknown>) {
    this.role = role;
    this.proc = spawn(process.execPath, [entry, role, JSON.stringify(config)], {
      cwd: CHECKOUT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.proc.stderr!.on('data', (c: Buffer) => {
      this.#stderr = (this.#stderr + c.toString('utf8')).slice(-4000);
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', () => resolve()));
    this.ready = this.event((e) => e['event'] === 'ready') as Promise<unknown> as Promise<Ready>;
    void this.exited.then(() => {
      const err = new Error(`${role} exited:\n${this.#stderr}`);
      for (const c of this.#calls.values()) c.reject(err);
      this.#calls.clear();
    });
    createInterface({ input: this.proc.stdout! }).on('line', (text) => {
      const line = JSON.parse(text) as Line;
      if (line.id !== undefined) {
        const c = this.#calls.get(line.id);
        this.#calls.delete(line.id);
        if (line.ok === true) c?.resolve(line.value);
        else c?.reject(new Error(`${role}: ${line.error?.code}: ${line.error?.message}`));
        return;
      }
      const ev = line as Record<string, unknown>;
      this.events.push(ev);
      for (let i = this.#waiters.length - 1; i >= 0; i--)
        if (this.#waiters[i]!.match(ev)) this.#waiters.splice(i, 1)[0]!.resolve(ev);
    });
  }

  /** The first event (past or future) matching `match`. */
  event(match: (e: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
    const seen = this.events.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }

  call<T = unknown>(cmd: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#id;
    return new Promise<T>((resolve, reject) => {
      this.#calls.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.proc.stdin!.write(`${JSON.stringify({ id, cmd, args })}\n`);
    });
  }

  /** Live slots of the child's node (mux and per-stream). */
  async liveSlots(): Promise<number> {
    const m = await this.call<Record<string, number>>('metrics');
    return Object.entries(m)
      .filter(([k]) => k.endsWith('live_slots'))
      .reduce((s, [, v]) => s + v, 0);
  }

  kill(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    return this.exited;
  }

  /** Close stdin: the child exits on its own. */
  async end(): Promise<void> {
    this.proc.stdin!.end();
    await Promise.race([this.exited, new Promise((r) => setTimeout(r, 3000))]);
    await this.kill();
  }
}
