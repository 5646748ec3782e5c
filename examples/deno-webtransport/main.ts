// The page: WebTransport first (the dev certificate is accepted by its hash), WebSocket if it must.
import { createNode } from 'lanemux';
import { browserClientTransport } from 'lanemux/transport/browser';
import { certificateHashFromHex } from 'lanemux/transport/dev-cert';

const q = new URLSearchParams(location.search); // ?wt=…&ws=…&hash=…, from the server's ready line
const transport = browserClientTransport({
  webTransport: { serverCertificateHashes: [certificateHashFromHex(q.get('hash') ?? '')] },
  webSocket: { url: q.get('ws') ?? 'ws://127.0.0.1:8080/lanemux' },
});
const node = await createNode({ transports: [transport] });
const peer = await node.connect(q.get('wt') ?? 'https://127.0.0.1:4433/lanemux');

let text = '';
for await (const token of node.stream<string>(peer, 'generate', { prompt: 'hello' })) text += token;
document.getElementById('answer')!.textContent = `${text.trim()} (over ${transport.transportInUse})`;
