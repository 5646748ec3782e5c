// The engine: serves `generate` over TCP to frontends.
import { createNode } from 'lanemux';
import { tcpTransport } from 'lanemux/transport/tcp';

const engine = await createNode({ transports: [tcpTransport({ port: Number(process.env.PORT ?? 7070) })] });
engine.serve('generate', async ({ prompt, count }, sender, { signal }) => {
  for (let i = 0; i < count && !signal.aborted; i++) await sender.send(`${prompt}-${i}`);
});
console.log(`ready ${engine.address}`);
