// Read a stream to its end, keeping what arrived before an error: for tests that assert both.

/** Every item in order, and the error that ended the stream (null when it finished). */
export async function collect<T>(stream: AsyncIterable<T>): Promise<{ items: T[]; error: unknown }> {
  const items: T[] = [];
  try {
    for await (const v of stream) items.push(v);
    return { items, error: null };
  } catch (error) {
    return { items, error };
  }
}
