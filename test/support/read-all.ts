// Drain a stream to the end. Plain TypeScript with no runtime globals: the Deno and Bun suites use it too.

/** Read a whole stream; resolves with its items in order, rejects with the stream's error. */
export async function readAll<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of stream) out.push(x);
  return out;
}
