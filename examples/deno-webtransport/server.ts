// A Deno server serving `generate` over WebTransport (QUIC, with a self-signed development certificate
// that browsers accept by its hash) and over WebSocket for clients without WebTransport.
import { createNode } from 'lanemux';
import { denoWebSocketServerTransport } from 'lanemux/transport/deno-ws';
import { createDevCertificate } from 'lanemux/transport/dev-cert';
import { webTransportServerTransport } from 'lanemux/transport/webtransport-server';

const port = (name: string, fallback: number): number => Number(Deno.env.get(name) ?? fallback);
const cert = await createDevCertificate({ ipAddresses: ['127.0.0.1'] }); // valid 13 days
const node = await createNode({
  transports: [
    webTransportServerTransport({ cert: cert.certPem, key: cert.keyPem, port: port('WT_PORT', 4433) }),
    denoWebSocketServerTransport({ port: port('WS_PORT', 8080) }),
  ],
});

node.serve('generate', async ({ prompt }: { prompt: string }, sender, { signal }) => {
  for (const word of `Deno says: ${prompt}`.split(' ')) {
    if (signal.aborted) return;
    await sender.send(`${word} `);
  }
});

const [webTransport, webSocket] = node.addresses;
console.log(`ready ${JSON.stringify({ webTransport, webSocket, certHash: cert.hashHex })}`);
