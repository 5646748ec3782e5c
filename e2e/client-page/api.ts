/** The driver API of the `lanemux/client` page (`window.e2e`), shared with e2e/browser-client.test.ts. */

/** What a call read: its items, and how it ended (`done`, or the error's code). */
export interface CallResult {
  readonly items: unknown[];
  readonly end: 'done' | string;
}

export interface ClientPage {
  /** `connect(url)` (lanemux/client over WebSocket); the server's worker id. */
  connect(url: string): Promise<string>;
  /** `client.stream(method, request)`, read to its end. */
  call(method: string, request: unknown): Promise<CallResult>;
  /** Start a call and read `n` items of it; the call stays open under `id`. */
  callAndRead(id: string, method: string, request: unknown, n: number): Promise<unknown[]>;
  /** `cancel()` the call `id`, then read it on: what the reader sees after the cancel. */
  cancel(id: string): Promise<CallResult>;
  /** The client's `streaming_mux_live_slots`. */
  liveSlots(): number;
  close(): Promise<void>;
}
