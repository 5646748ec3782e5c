// A promise a test resolves by hand: one side waits on it, the other says when.

/** A promise and its resolver. */
export function signalled(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
