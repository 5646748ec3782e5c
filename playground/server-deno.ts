// The playground's Deno server: the same decode engine (engine.mjs) behind a WebTransport endpoint.
//
//   npm run build
//   DENO_NO_UPDATE_CHECK=1 node_modules/.bin/deno run --unstable-net --node-modules-dir=manual -A \
//     playground/server-deno.ts [--port 8788]
//
// then open the playground page with `?engine=http://127.0.0.1:8788/engine.json`.
//
// - WebTransport runs over QUIC (UDP) and needs TLS: the server makes a self-signed ECDSA P-256
//   certificate valid 13 days at start, and `GET /engine.json` (plain HTTP on --port) hands the page
//   its SHA-256, which Chromium accepts through `serverCertificateHashes` without a CA.
// - Each engine generation listens on a fresh UDP port (port 0): the page reads the current address
//   from /engine.json every time it (re)connects.
// It prints one JSON line `{"ready":true,"info":...,"address":...}` once it listens.
import { createDevCertificate } from '../src/adapters/dev-cert.ts';
import { webTransportServerTransport } from '../src/adapters/deno-webtransport.ts';
// @ts-expect-error engine.mjs is plain JavaScript without declarations (Deno runs it as is).
import { createEngine } from './engine.mjs';

/** The few Deno APIs this script uses (Deno's own types are not in this project's TS libs). */
declare const Deno: {
  readonly args: readonly string[];
  serve(
    options: { hostname: string; port: number; onListen?: (addr: { port: number }) => void },
    handler: (req: Request) => Response,
  ): { finished: Promise<void> };
  addSignalListener(signal: 'SIGINT' | 'SIGTERM', handler: () => void): void;
  exit(code: number): never;
};

const arg = (name: string, fallback: string): string => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? (Deno.args[i + 1] ?? fallback) : fallback;
};
const port = Number(arg('port', '8788'));
const hostname = arg('host', '127.0.0.1');
const quiet = Deno.args.includes('--quiet');
const log = quiet ? () => {} : (line: string) => console.error(`[engine] ${line}`);

const cert = await createDevCertificate({ ipAddresses: [hostname] });
const engine = await createEngine({
  // Chromium refuses `localhost` here (it tries ::1 first): the address uses the literal IP.
  transports: () => [
    webTransportServerTransport({ cert: cert.certPem, key: cert.keyPem, hostname, port: 0, path: '/lanemux' }),
  ],
  log,
});

const info = (): Response =>
  new Response(
    JSON.stringify({ transport: 'webtransport', address: engine.address, runtime: 'deno', certHashes: [cert.hashHex] }),
    {
      headers: { 'content-type': 'application/json', 'access-control-allow-origin': '*', 'cache-control': 'no-store' },
    },
  );

Deno.serve(
  {
    hostname,
    port,
    onListen: ({ port: bound }) => {
      console.log(
        JSON.stringify({ ready: true, info: `http://${hostname}:${bound}/engine.json`, address: engine.address }),
      );
      log(`lanemux engine (WebTransport) on ${engine.address}; certificate valid until ${cert.notAfter.toISOString()}`);
      log(`open the playground with ?engine=http://${hostname}:${bound}/engine.json`);
    },
  },
  (req) => (new URL(req.url).pathname === '/engine.json' ? info() : new Response('not found\n', { status: 404 })),
);

const stop = async (): Promise<void> => {
  await engine.close();
  Deno.exit(0);
};
Deno.addSignalListener('SIGINT', () => void stop());
Deno.addSignalListener('SIGTERM', () => void stop());
