// A byte relay that lets a WebTransport *client* play the listening side, so the transport
// conformance suite (whose server and client messengers live in one JS context) can run inside
// Chromium, where nothing can listen. Every byte still crosses Chromium's WebTransport stack and a
// Deno WebTransport server:
//   - the page's listener opens /listen/<id> and a control stream; the relay acknowledges with k=0;
//   - a client session at /dial/<id> gets a number k, sent on the control stream; the listener opens
//     /accept/<id>/<k>, which the relay pairs with the dial session;
//   - each bidirectional stream the dialler opens is piped both ways to a stream the relay opens on
//     the paired accept session; when either session closes, the relay closes the other.
// A dial with no listener is closed at once (a refused port). Framing, END and GOAWAY are end to end.
//   deno run --unstable-net --allow-net --allow-read test/webtransport/relay-server.deno.ts <cert.pem> <key.pem>
// Prints {"relay": "https://127.0.0.1:PORT"} when listening; exits when its stdin closes.

interface Bidi {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
}
interface Session {
  readonly url: string;
  readonly ready: Promise<unknown>;
  readonly closed: Promise<unknown>;
  readonly incomingBidirectionalStreams: ReadableStream<Bidi>;
  createBidirectionalStream(): Promise<Bidi>;
  close(info?: { closeCode?: number; reason?: string }): void;
}
interface Incoming {
  accept(): Promise<unknown>;
}
interface DenoApi {
  readonly args: readonly string[];
  readonly stdin: { readonly readable: ReadableStream<Uint8Array> };
  exit(code: number): never;
  readTextFile(p: string): Promise<string>;
  QuicEndpoint: new (o: {
    hostname: string;
    port: number;
  }) => {
    readonly addr: { port: number };
    listen(o: Record<string, unknown>): AsyncIterable<Incoming>;
  };
  upgradeWebTransport(conn: unknown): Promise<Session>;
}
const D = (globalThis as unknown as { Deno: DenoApi }).Deno;
const [certFile = '', keyFile = ''] = D.args;
const endpoint = new D.QuicEndpoint({ hostname: '127.0.0.1', port: 0 });
const listener = endpoint.listen({
  cert: await D.readTextFile(certFile),
  key: await D.readTextFile(keyFile),
  alpnProtocols: ['h3'],
  maxConcurrentBidirectionalStreams: 1000,
  maxConcurrentUnidirectionalStreams: 100,
});

interface ListenerEntry {
  readonly writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly session: Session;
  /** Dial sessions announced to this listener and not yet paired: closed with it. */
  readonly unpaired: Set<Session>;
}
const listeners = new Map<string, ListenerEntry>();
const pending = new Map<number, (s: Session) => void>();
let nextK = 0;

function u32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n);
  return b;
}

function closeQuietly(s: Session): void {
  try {
    s.close({ closeCode: 0, reason: 'relay peer closed' });
  } catch {
    // already closed
  }
}

async function onListen(s: Session, id: string): Promise<void> {
  const reader = s.incomingBidirectionalStreams.getReader();
  const { value: ctl } = await reader.read();
  if (ctl === undefined) return;
  const writer = ctl.writable.getWriter();
  const entry: ListenerEntry = { writer, session: s, unpaired: new Set() };
  listeners.set(id, entry);
  const unregister = (): void => {
    if (listeners.get(id) === entry) listeners.delete(id);
    for (const d of entry.unpaired) closeQuietly(d);
  };
  // A listener that went away will not accept what it was told about: refuse those dials now.
  void s.closed.catch(() => {}).finally(() => unregister());
  await writer.write(u32(0)); // registered: the listener may announce its address
  // The listener says goodbye in band (byte 1) before closing: Deno does not always notice a session
  // closed by Chromium, and a dial announced to a listener that is gone would wait for nothing.
  void (async () => {
    const r = ctl.readable.getReader();
    try {
      for (;;) {
        const { value, done } = await r.read();
        if (done || value === undefined) break;
        if (value.includes(1)) break;
      }
    } catch {
      // session closed
    }
    unregister();
  })();
}

async function onDial(s: Session, id: string): Promise<void> {
  const entry = listeners.get(id);
  if (entry === undefined) {
    closeQuietly(s);
    return;
  }
  const k = ++nextK;
  const accepted = new Promise<Session>((resolve) => pending.set(k, resolve));
  entry.unpaired.add(s);
  const timer = setTimeout(() => {
    pending.delete(k);
    entry.unpaired.delete(s);
    closeQuietly(s);
  }, 5_000);
  entry.writer.write(u32(k)).catch(() => closeQuietly(s));
  void accepted.then((a) => {
    clearTimeout(timer);
    entry.unpaired.delete(s);
    void a.closed.catch(() => {}).finally(() => closeQuietly(s));
    void s.closed.catch(() => {}).finally(() => closeQuietly(a));
  });
  const reader = s.incomingBidirectionalStreams.getReader();
  try {
    for (;;) {
      const { value: inbound, done } = await reader.read();
      if (done || inbound === undefined) return;
      const a = await accepted;
      const outbound = await a.createBidirectionalStream();
      void inbound.readable.pipeTo(outbound.writable).catch(() => {});
      void outbound.readable.pipeTo(inbound.writable).catch(() => {});
    }
  } catch {
    // session closed
  }
}

async function handle(incoming: Incoming): Promise<void> {
  const conn = await incoming.accept();
  const s = await D.upgradeWebTransport(conn);
  s.closed.catch(() => {});
  await s.ready;
  const [kind, id = '', k = ''] = new URL(s.url).pathname.split('/').filter(Boolean);
  if (kind === 'listen') return onListen(s, id);
  if (kind === 'dial') return onDial(s, id);
  const resolve = kind === 'accept' ? pending.get(Number(k)) : undefined;
  if (resolve === undefined) return closeQuietly(s);
  pending.delete(Number(k));
  resolve(s);
}

console.log(JSON.stringify({ relay: `https://127.0.0.1:${endpoint.addr.port}` }));
// Exit when the parent closes stdin (or dies): no orphan relays.
void D.stdin.readable
  .pipeTo(new WritableStream())
  .catch(() => {})
  .finally(() => D.exit(0));
for await (const incoming of listener) handle(incoming).catch(() => {});
