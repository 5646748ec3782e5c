/**
 * The Deno e2e server: a lanemux node behind a WebTransport endpoint (the Deno server adapter,
 * `src/adapters/deno-webtransport.ts`), serving `generate` like the Node server.
 *
 * Run (from the repo root, npm packages from the local node_modules):
 *   deno run --unstable-net --node-modules-dir=manual --allow-net --allow-read --allow-env \
 *     e2e/servers/deno-wt-server.ts <certDir>
 * `<certDir>` holds `cert.pem` and `key.pem` (ECDSA P-256, ≤ 14 days: Chromium's serverCertificateHashes rules).
 * Prints one JSON line `{"ready":true,"url":"https://127.0.0.1:PORT/…","port":PORT}` once listening; exits on
 * stdin EOF or SIGTERM.
 */
import { createNode } from '../../src/index.ts';
import { MESSENGER_MUX_KEY } from '../../src/messenger/index.ts';
import { createMessenger } from '../../src/messenger/index.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';
import { serveGenerate } from './generate.ts';

// The few Deno globals this script uses (the project's type check runs with Node's types).
declare const Deno: {
  readonly args: readonly string[];
  readTextFile(path: string): Promise<string>;
  addSignalListener(signal: 'SIGTERM' | 'SIGINT', handler: () => void): void;
  exit(code?: number): never;
  readonly stdin: { readonly readable: ReadableStream<Uint8Array> };
};

const certDir = Deno.args[0];
if (certDir === undefined) throw new Error('usage: deno-wt-server.ts <certDir>');
const cert = await Deno.readTextFile(`${certDir}/cert.pem`);
const key = await Deno.readTextFile(`${certDir}/key.pem`);

const messenger = await createMessenger({
  transports: [webTransportServerTransport({ hostname: '127.0.0.1', port: 0, cert, key })],
  transportKeys: [MESSENGER_MUX_KEY],
  healthCheck: false,
});
const node = await createNode({ messenger });
serveGenerate(node, messenger);
const url = messenger.addresses[0] ?? '';
console.log(JSON.stringify({ ready: true, url, port: Number(new URL(url).port) }));

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  await node.close();
  await messenger.close();
  Deno.exit(0);
}
Deno.addSignalListener('SIGTERM', () => void shutdown());
// The parent closes our stdin when it is done (also if it dies without signalling us).
void (async () => {
  const reader = Deno.stdin.readable.getReader();
  while (!(await reader.read()).done);
  await shutdown();
})();
