/**
 * `await using x = …` support where the runtime has explicit resource management: defines
 * `[Symbol.asyncDispose]` on a prototype as a call to its `close()`. Runtimes without
 * `Symbol.asyncDispose` get nothing (and need nothing).
 */
export function defineAsyncDispose(proto: { close(): Promise<void> }): void {
  const dispose = (Symbol as { asyncDispose?: symbol }).asyncDispose;
  if (typeof dispose !== 'symbol') return;
  Object.defineProperty(proto, dispose, {
    value(this: { close(): Promise<void> }) {
      return this.close();
    },
  });
}
