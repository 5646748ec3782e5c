// The app, identical on Node, Deno and Bun: Hono routes for plain HTTP, and the lanemux handler.
import { Hono } from 'hono';

export const app = new Hono();
app.get('/', (c) => c.text('Hello from Hono; lanemux is at /lanemux\n'));

/** Serve `generate` on a lanemux node: each call streams the words of its answer. */
export function serveGenerate(node) {
  node.serve('generate', async ({ prompt }, sender, { signal }) => {
    for (const word of `Hono says: ${prompt}`.split(' ')) {
      if (signal.aborted) return; // the client cancelled or went away
      await sender.send(`${word} `); // waits only when the client's credit runs out
    }
  });
}
