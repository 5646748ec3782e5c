// A lanemux messenger served over WebTransport by the Deno server adapter, for the Chromium and
// Deno clients of chromium.test.ts / bench.ts. Prints one JSON line {"address": ...} when listening.
//   deno run --unstable-net --allow-net --allow-read test/webtransport/echo-server.deno.ts <cert.pem> <key.pem> [lanes]
// Handlers: 'echo' request → its body; batches whose first byte is 1 are echoed back on their lane;
// other batches are counted, and 'expect'(n) makes the server send a 'done' message once n arrived.
// It exits when its stdin closes (so a test runner that dies leaves no server behind).
import { createMessenger } from '../../src/messenger/messenger.ts';
import { webTransportServerTransport } from '../../src/adapters/deno-webtransport.ts';

interface DenoLike {
  readonly args: readonly string[];
  readonly stdin: { readonly readable: ReadableStream<Uint8Array> };
  readTextFile(path: string): Promise<string>;
  exit(code: number): never;
}
const deno = (globalThis as unknown as { Deno: DenoLike }).Deno;
const [certFile = '', keyFile = '', lanesArg = '4'] = deno.args;
const lanes = Number(lanesArg);
const server = await createMessenger({
  transports: [
    webTransportServerTransport({
      cert: await deno.readTextFile(certFile),
      key: await deno.readTextFile(keyFile),
      port: 0,
    }),
  ],
  lanes,
  maxMessageSize: 256 * 1024,
  healthCheck: false,
});
server.handle('echo', (_from, body) => body);
let expected = 0;
let count = 0;
server.handle('expect', (_from, n) => {
  expected = n as number;
  count = 0;
  return true;
});
for (let lane = 0; lane < lanes; lane++) {
  server.registerBatchHandler(lane, (from, l, payload) => {
    if (payload[0] === 1) {
      const a = server.sendBatch(from, l, payload);
      if (a !== true) a.catch(() => {});
      return;
    }
    if (++count === expected) {
      const a = server.send(from, 0, 'done', Uint8Array.of(count & 0xff));
      if (a !== true) a.catch(() => {});
    }
  });
}
console.log(JSON.stringify({ address: server.addresses[0] }));
// Exit when the parent closes stdin (or dies): no orphan servers.
await deno.stdin.readable.pipeTo(new WritableStream()).catch(() => {});
deno.exit(0);
