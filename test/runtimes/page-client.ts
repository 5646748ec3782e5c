// A page's client (`lanemux/client`) run by Deno or Bun on its global WebSocket: connects to the URL
// given as the first argument, calls `count` for 16 streams at once, prints one JSON line of what arrived.
import { connect } from '../../src/client.ts';

const url = (globalThis as { Deno?: { args: string[] } }).Deno?.args[0] ?? process.argv[2]!;
const runtime = 'Deno' in globalThis ? 'deno' : 'Bun' in globalThis ? 'bun' : 'node';
const client = await connect(url);
const streams = await Promise.all(
  Array.from({ length: 16 }, async (_, id) => {
    const items: unknown[] = [];
    for await (const v of client.stream('count', { id, n: 200 })) items.push(v);
    return items;
  }),
);
await client.close();
console.log(JSON.stringify({ runtime, streams }));
