/**
 * The e2e page's driver API (`window.e2e`): types only, shared by the page and the tests that call
 * it through `page.evaluate`.
 */
import type { MuxConfig, ResumeOptions } from '../../src/index.ts';

/** How the page reaches the server. */
export interface ConnectOptions {
  /** `ws://…/lanemux` (kind `ws`) or `https://…` (kind `wt`). */
  readonly url: string;
  readonly kind: 'ws' | 'wt';
  /** SHA-256 of the server's self-signed certificate, hex (WebTransport `serverCertificateHashes`). */
  readonly certHashHex?: string;
  /**
   * Instead of `certHashHex`: fetch the server's current certificate hash (hex text) from this URL in the
   * `serverCertificateHashes` function, which the adapter calls before every connect and reconnect (a server
   * restarted with a new development certificate). Each call's answer is kept (`certHashCalls`).
   */
  readonly certHashUrl?: string;
  /**
   * The page messenger's health check of its links (pings; a link that does not answer is closed, then
   * redialled). Defaults to off.
   */
  readonly healthCheck?: { readonly intervalMs: number; readonly timeoutMs: number };
  /** Extra options for the WebTransport client adapter. */
  readonly transportOptions?: Record<string, unknown>;
  /** The page node's mux config (it is the consumer: credit and byte budgets are its terms). */
  readonly mux?: MuxConfig;
  /**
   * Resume streams across a lost link (the page advertises `lanemux-resume-v1` and its node resumes).
   * Defaults to off: a lost link ends the page's streams `ERR_SENDER_DROPPED`.
   */
  readonly resume?: ResumeOptions;
}

/** One `generate` request from the page. */
export interface GenerateOptions {
  /** Request id (every token names it). Defaults to `r<stream id>`; `generateMany` appends the index. */
  readonly prompt?: string;
  readonly n: number;
  readonly delayMs?: number;
  readonly tail?: number;
  /** Read the stream (false: never call `next()`, the stalled-reader case). Defaults to true. */
  readonly read?: boolean;
  /** Render the tokens into the DOM. Defaults to true. */
  readonly render?: boolean;
  /** How the page reads: `for await` (default) or push mode (`anchor.consume`). */
  readonly reader?: 'iterator' | 'push';
  /**
   * Keep the stream in `sessionStorage` as it is read (the server's resume token and the tokens rendered
   * so far, under its prompt), so that the page can re-attach it after a reload. Defaults to false.
   */
  readonly persist?: boolean;
}

/** `e2e.reattach` options. */
export interface ReattachDriverOptions {
  /** Change one hex digit of the saved token (a forged or stale token). Defaults to false. */
  readonly tamper?: boolean;
}

/** What `e2e.reattach` did. */
export interface ReattachResult {
  /** The saved stream's id (its DOM element is `#s-<id>` again). */
  readonly id: string;
  /** Tokens the page had saved, the `offset` of the re-attach. */
  readonly offset: number;
  /** The re-attach was refused (`node.reattach` rejected): nothing is read. */
  readonly error: ErrorInfo | null;
}

/** A lanemux error as the page saw it. */
export interface ErrorInfo {
  readonly code: string;
  readonly retryable: boolean;
  readonly message: string;
  /** A `ResumeFailedError`'s reason (`window`, `restarted`, …). */
  readonly reason?: string;
}

/** What the page saw of one stream. */
export interface StreamResult {
  readonly id: string;
  readonly prompt: string;
  readonly tokens: string[];
  readonly startMs: number;
  firstTokenMs: number | null;
  /** When the server's reply to `generate` arrived (it had opened the stream), ms after the request. */
  repliedMs: number | null;
  /** When the first token after the link last came back arrived (`performance.now()` of the page). */
  flowingAt: number | null;
  endMs: number | null;
  end: 'finalized' | 'cancelled' | 'error' | null;
  error: ErrorInfo | null;
  /** Tokens were `prompt:0..m-1` then `prompt:tail0..t-1`, nothing else. */
  orderOk: boolean;
  mainCount: number;
  tailCount: number;
  cancelled: boolean;
  requestError: ErrorInfo | null;
}

/** Figures of a `generateMany` run, measured in the page. */
export interface ManySummary {
  readonly ids: string[];
  readonly streams: number;
  readonly tokens: number;
  readonly wallMs: number;
  readonly tokensPerSecond: number;
  /** Time to first token from the request, ms. */
  readonly ttftP50Ms: number;
  readonly ttftP99Ms: number;
  /** Reply to `generate` (the server opened the stream), p50, ms after the request. */
  readonly replyP50Ms: number;
  readonly allOrdered: boolean;
  readonly allFinalized: boolean;
  /** Main tokens each stream got, in `ids` order. */
  readonly mainCounts: number[];
  readonly badStreams: ReadonlyArray<{ id: string; end: string | null; tokens: number; error: ErrorInfo | null }>;
}

/** The page's view of its link to the server: how many times it went down and came back. */
export interface LinkState {
  readonly downs: number;
  readonly ups: number;
}

/** One lost link as the page lived it (page clock, ms after the page saw the link go down). */
export interface Recovery {
  /** When the page saw the link go down, `Date.now()` (the machine's clock, which the test shares). */
  readonly downWallMs: number;
  /** The link came back (the messenger's `up`/`resumed`). */
  readonly linkBackMs: number;
  /** Every stream still open had a token again (the last of them to get one after the link came back). */
  readonly allFlowingMs: number;
  /** Streams still open when the link came back. */
  readonly open: number;
}

/** `window.e2e`. */
export interface E2ePage {
  connect(options: ConnectOptions): Promise<{ workerId: string; peer: string }>;
  waitPeer(timeoutMs: number): Promise<string>;
  generate(options: GenerateOptions): Promise<string>;
  generateMany(count: number, options: GenerateOptions): Promise<ManySummary>;
  /**
   * After a reload: take the stream `prompt` saved in `sessionStorage` (see {@link GenerateOptions.persist})
   * with `node.reattach(server, token, { offset: saved tokens })`, restore its DOM element with the saved
   * text and read the rest into it. The page must be connected with `resume`.
   */
  reattach(prompt: string, options?: ReattachDriverOptions): Promise<ReattachResult>;
  /** Start `count` streams (prompts `<prompt><i>`); resolves with their ids once the server answered every request. */
  startMany(count: number, options: GenerateOptions): Promise<string[]>;
  /**
   * Wait for the streams `ids` to end, and sum them up: each must have `n` tokens (any number, after a
   * stop, with `n` undefined) in order, no tail, and a clean end.
   */
  waitMany(ids: string[], n?: number): Promise<ManySummary>;
  /** `requestStop()` on every stream of `ids`. */
  stopMany(ids: string[]): void;
  /** Streams of `ids` that have not ended. */
  openCount(ids: string[]): number;
  linkState(): LinkState;
  /**
   * After the link's `downs`-th loss: wait for the link to come back and for every stream of `ids`
   * still open to get a token after that, and say how long each took.
   */
  waitFlowing(ids: string[], downs: number, timeoutMs: number): Promise<Recovery>;
  result(id: string): StreamResult;
  tokenCount(id: string): number;
  waitEnd(id: string): Promise<StreamResult>;
  waitTokens(id: string, atLeast: number, timeoutMs: number): Promise<number>;
  requestStop(id: string): void;
  cancel(id: string): void;
  domText(id: string): string | null;
  metrics(): Record<string, number>;
  /** The hashes (hex) the `serverCertificateHashes` function returned, one per call (see `certHashUrl`). */
  certHashCalls(): string[];
  close(): Promise<void>;
}
