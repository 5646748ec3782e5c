/**
 * The Deno e2e server: a lanemux node behind a WebTransport endpoint (the Deno server adapter,
 * `src/adapters/deno-webtransport.ts`), serving `generate` like the Node server.
 *
 * Run (from the repo root, npm packages from the local node_modules):
 *   deno run --unstable-net --node-modules-dir=manual --allow-net --allow-read --allow-env \
 *     e2e/servers/deno-wt-server.ts <certDir> [port] [workerId]
 * `port` defaults to 0 (any free UDP port); a restarted server passes the port and the worker id (hex) it had: the
 * same worker as a new instance. `<certDir>` holds `cert.pem` and `key.pem` (ECDSA P-256, ≤ 14 days: Chromium's serverCertificateHashes rules).
 * Prints one JSON line `{"ready":true,"url":"https://127.0.0.1:PORT/…","port":PORT,"workerId":"<hex>"}` once listening; exits on
 * stdin EOF or SIGTERM. Resume is on (pages that advertise it too resume their streams across lost links), with
 * history (a reloaded page re-attaches a stream from the resume token of its `generate` reply).
 *
 * Commands, one per stdin line, each answered by one JSON line on stdout:
 * - `cut`: close the QUIC connection of every current session (a lost link: the server, its node and its
 *   streams live on) → `{"cut":N}`, N connections closed;
 * - `metrics`: the node's metrics → `{"metrics":{…}}`;
 * - `served <prefix>`: the streams served whose prompt starts with `<prefix>` → `{"served":{prompt:{accepted,outcome}}}`.
 */
import { createNode } from '../../src/index.ts';
import { MESSENGER_MUX_KEY } from '../../src/messenger/index.ts';
import { createMessenger } from '../../src/messenger/index.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { RESUME_KEY } from '../../src/stream/resume-options.ts';
import { serveGenerate } from './generate.ts';

// The few Deno globals this script uses (the project's type check runs with Node's types).
interface QuicConn {
  close(info?: { closeCode: number; reason: string }): void;
}
declare const Deno: {
  upgradeWebTransport(conn: QuicConn): Promise<{ readonly closed: Promise<unknown> }>;
  readonly args: readonly string[];
  readTextFile(path: string): Promise<string>;
  addSignalListener(signal: 'SIGTERM' | 'SIGINT', handler: () => void): void;
  exit(code?: number): never;
  readonly stdin: { readonly readable: ReadableStream<Uint8Array> };
};

const certDir = Deno.args[0];
if (certDir === undefined) throw new Error('usage: deno-wt-server.ts <certDir> [port]');
const port = Number(Deno.args[1] ?? 0);
const workerId = Deno.args[2] === undefined ? undefined : BigInt(`0x${Deno.args[2]}`);
const cert = await Deno.readTextFile(`${certDir}/cert.pem`);
const key = await Deno.readTextFile(`${certDir}/key.pem`);

// The adapter upgrades each QUIC connection through `Deno.upgradeWebTransport`: wrapped here, so that
// `cut` can close the connections of the live sessions (the adapter keeps them to itself).
const live = new Set<QuicConn>();
const upgrade = Deno.upgradeWebTransport.bind(Deno);
Deno.upgradeWebTransport = async (conn) => {
  const session = await upgrade(conn);
  live.add(conn);
  void session.closed.then(
    () => live.delete(conn),
    () => live.delete(conn),
  );
  return session;
};

const messenger = await createMessenger({
  transports: [webTransportServerTransport({ hostname: '127.0.0.1', port, cert, key })],
  // A node given its messenger resumes only if that messenger advertises the resume key.
  transportKeys: [MESSENGER_MUX_KEY, RESUME_KEY],
  healthCheck: false,
  ...(workerId === undefined ? {} : { workerId }),
});
// History on: a reloaded page re-attaches its streams from their resume tokens (docs/protocol.md §8.5).
const node = await createNode({ messenger, resume: { windowMs: 30_000, history: true } });
const served = serveGenerate(node, messenger);
const url = messenger.addresses[0] ?? '';
console.log(
  JSON.stringify({ ready: true, url, port: Number(new URL(url).port), workerId: node.workerId.toString(16) }),
);

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  await node.close();
  await messenger.close();
  Deno.exit(0);
}
Deno.addSignalListener('SIGTERM', () => void shutdown());
function command(line: string): void {
  if (line === 'cut') {
    const n = live.size;
    for (const c of live) {
      try {
        c.close({ closeCode: 0, reason: 'cut' });
      } catch {
        // Already closed.
      }
    }
    live.clear();
    console.log(JSON.stringify({ cut: n }));
  } else if (line === 'metrics') console.log(JSON.stringify({ metrics: node.metrics() }));
  else if (line.startsWith('served ')) {
    const prefix = line.slice('served '.length);
    const out: Record<string, { accepted: number; outcome: string }> = {};
    for (const [prompt, s] of served)
      if (prompt.startsWith(prefix)) out[prompt] = { accepted: s.accepted, outcome: s.outcome };
    console.log(JSON.stringify({ served: out }));
  }
}
// Commands by line; the parent closes our stdin when it is done (also if it dies without signalling us).
void (async () => {
  const reader = Deno.stdin.readable.getReader();
  const text = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += text.decode(value, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      command(buffered.slice(0, nl).trim());
      buffered = buffered.slice(nl + 1);
    }
  }
  await shutdown();
})();
