// The one polling wait of the suites: for state that has no event to await (no bare sleeps).

/**
 * Resolve when `predicate` holds, checking every `everyMs`; reject after `timeoutMs` naming `what`.
 * Defaults: 5 s, checked every 5 ms.
 */
export async function waitFor(
  predicate: () => boolean,
  timeoutMs = 5_000,
  what = 'condition',
  everyMs = 5,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
