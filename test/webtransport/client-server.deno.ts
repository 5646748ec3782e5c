/**
 * The Deno WebTransport server of client.test.ts: a lanemux node (the Deno server adapter) serving
 * methods to `lanemux/client` pages, resume on.
 *
 * Run: deno run --unstable-net --node-modules-dir=manual --allow-net --allow-read --allow-env \
 *   test/webtransport/client-server.deno.ts <certDir>
 * Prints `{"ready":true,"url":"https://127.0.0.1:PORT/…"}` once listening; exits on stdin EOF or SIGTERM.
 * Served: `count {n, hold?}` sends `tok0..tok{n-1}`, waiting before `tok{hold}` for `release`;
 * `forever` sends 0, 1, 2… until its call is cancelled.
 * Commands, one per stdin line, each answered by one JSON line:
 * - `cut`: close the QUIC connection of every live session (a lost link; the node lives on) → `{"cut":N}`;
 * - `release`: let a held `count` go on → `{"released":true}`;
 * - `state` → `{"aborted":N,"liveSlots":N}` (`forever` calls whose signal fired, live slots).
 */
import { createNode } from '../../src/index.ts';
import { MESSENGER_MUX_KEY, createMessenger } from '../../src/messenger/index.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { RESUME_KEY } from '../../src/stream/resume-options.ts';

// The few Deno globals this script uses (the project's type check runs with Node's types).
interface QuicConn {
  close(info?: { closeCode: number; reason: string }): void;
}
declare const Deno: {
  upgradeWebTransport(conn: QuicConn): Promise<{ readonly closed: Promise<unknown> }>;
  readonly args: readonly string[];
  readTextFile(path: string): Promise<string>;
  addSignalListener(signal: 'SIGTERM', handler: () => void): void;
  exit(code?: number): never;
  readonly stdin: { readonly readable: ReadableStream<Uint8Array> };
};

const certDir = Deno.args[0];
if (certDir === undefined) throw new Error('usage: client-server.deno.ts <certDir>');
const cert = await Deno.readTextFile(`${certDir}/cert.pem`);
const key = await Deno.readTextFile(`${certDir}/key.pem`);

// Wrapped so that `cut` can close the QUIC connections of live sessions (the adapter keeps them).
const live = new Set<QuicConn>();
const upgrade = Deno.upgradeWebTransport.bind(Deno);
Deno.upgradeWebTransport = async (conn) => {
  const session = await upgrade(conn);
  live.add(conn);
  const drop = () => live.delete(conn);
  void session.closed.then(drop, drop);
  return session;
};

const messenger = await createMessenger({
  transports: [webTransportServerTransport({ hostname: '127.0.0.1', port: 0, cert, key })],
  transportKeys: [MESSENGER_MUX_KEY, RESUME_KEY],
  healthCheck: false,
});
const node = await createNode({ messenger, resume: { windowMs: 30_000 } });
let release!: () => void;
const released = new Promise<void>((r) => (release = r));
let aborted = 0;
node.serve<{ n: number; hold?: number }, string>('count', async (req, sender) => {
  for (let i = 0; i < req.n; i++) {
    if (i === req.hold) await released;
    await sender.send(`tok${i}`);
  }
});
node.serve('forever', async (_req, sender, { signal }) => {
  signal.addEventListener('abort', () => aborted++, { once: true });
  for (let i = 0; !signal.aborted; i++) await sender.send(i);
});
console.log(JSON.stringify({ ready: true, url: messenger.addresses[0] ?? '' }));

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
  } else if (line === 'release') {
    release();
    console.log(JSON.stringify({ released: true }));
  } else if (line === 'state') {
    console.log(JSON.stringify({ aborted, liveSlots: node.metrics()['velo_streaming_mux_live_slots'] ?? 0 }));
  }
}
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
