/**
 * What the e2e page and the e2e servers agree on: the `generate` request and the token text.
 * Runtime-agnostic (the page, the Node server and the Deno server all import it).
 */

/** Unary handler the servers register: open the stream from the ticket, stream tokens in the background. */
export const GENERATE_HANDLER = 'e2e.generate';

/** Body of a `generate` request (the page's anchor handle and zero-RTT ticket travel in it). */
export interface GenerateRequest {
  readonly handle: string;
  readonly ticket: string;
  /** Request id; every token names it. */
  readonly prompt: string;
  /** Tokens to stream before finalizing. */
  readonly n: number;
  /** Pause between tokens, ms (0: as fast as credit allows). */
  readonly delayMs: number;
  /** Tokens sent after a stop request, before finalizing. */
  readonly tail: number;
}

/** Answer of a `generate` request: the stream is open. */
export interface GenerateReply {
  readonly ok: true;
  /**
   * The stream's `sender.resumeToken` (a server with `resume: { history: true }`), which the page keeps
   * to re-attach after a reload; null without history.
   */
  readonly resumeToken: string | null;
}

/** The i-th token of a request: deterministic, so the page and the test can check content and order. */
export function tokenText(prompt: string, i: number): string {
  return `${prompt}:${i} `;
}

/** The k-th token of the tail a server sends after a stop request. */
export function tailText(prompt: string, k: number): string {
  return `${prompt}:tail${k} `;
}

/**
 * Check a received token sequence: `tokenText(prompt, 0..m-1)` then (after a stop) `tailText(prompt, 0..t-1)`.
 * Returns the counts, or the index of the first token out of place.
 */
export function checkOrder(
  prompt: string,
  tokens: readonly string[],
): { ok: boolean; main: number; tail: number; badAt: number } {
  let main = 0;
  let tail = 0;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (tail === 0 && t === tokenText(prompt, main)) main++;
    else if (t === tailText(prompt, tail)) tail++;
    else return { ok: false, main, tail, badAt: i };
  }
  return { ok: true, main, tail, badAt: -1 };
}
