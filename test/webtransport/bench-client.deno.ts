// Deno → Deno figures: the standard-API client adapter (Deno's global WebTransport) against
// echo-server.deno.ts. Prints one JSON line.
//   deno run --unstable-net --allow-net test/webtransport/bench-client.deno.ts <address> <sha256-hex> <lanes> [rtts] [messages]
import { certificateHashFromHex } from '../../src/adapters/dev-cert.ts';
import { webTransportClientTransport } from '../../src/adapters/webtransport.ts';
import { runBench } from './browser/bench.ts';

const args = (globalThis as unknown as { Deno: { args: readonly string[] } }).Deno.args;
const [address = '', hex = '', lanes = '1', rtts = '1000', messages = '100000'] = args;
const hash = certificateHashFromHex(hex);
const result = await runBench({
  address,
  lanes: Number(lanes),
  rtts: Number(rtts),
  messages: Number(messages),
  transport: () => webTransportClientTransport({ serverCertificateHashes: [hash] }),
});
console.log(JSON.stringify({ client: 'deno', lanes: Number(lanes), ...result }));
