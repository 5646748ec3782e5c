// The page client's WebTransport carrier on a fake session (a `{ readable, writable }` pair): the
// framing, the END marker and the closing handshake that the Deno server adapter expects.
import { describe, expect, it } from 'vitest';
import type { CarrierEvents } from '../../src/client/carrier.ts';
import { webTransportCarrier } from '../../src/client/webtransport.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';

/** What `connect` gives a carrier it opens: 1 s, 1 MiB, the system clock. */
const OPEN = { timeoutMs: 1000, maxMessageSize: 1 << 20, runtime: systemRuntime() };

interface Fake {
  /** Chunks the carrier wrote, one per `writer.write()`. */
  readonly written: Uint8Array[];
  /** Bytes to the carrier, as the server would write them. */
  push(bytes: number[] | Uint8Array): void;
  /** Resolve the pending writes (the server read them). */
  drain(): void;
  readonly closes: () => number;
  readonly inits: unknown[];
  readonly messages: Uint8Array[];
  readonly closedEvents: Array<[number, string]>;
  readonly events: CarrierEvents;
  readonly Ctor: never;
  loseSession(): void;
  readonly session: object;
}

function fake(): Fake {
  const written: Uint8Array[] = [];
  const pending: Array<() => void> = [];
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const readable = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  const writable = new WritableStream<Uint8Array>({
    write: (chunk) => {
      written.push(chunk);
      return new Promise<void>((r) => pending.push(r));
    },
  });
  let closes = 0;
  let end!: () => void;
  const closed = new Promise<void>((r) => (end = r));
  const inits: unknown[] = [];
  const session = {
    ready: Promise.resolve(),
    closed,
    close: () => {
      closes++;
      end();
    },
    createBidirectionalStream: async () => ({ readable, writable }),
  };
  const messages: Uint8Array[] = [];
  const closedEvents: Array<[number, string]> = [];
  return {
    written,
    push: (b) => controller.enqueue(Uint8Array.from(b)),
    drain: () => {
      for (const r of pending.splice(0)) r();
    },
    closes: () => closes,
    inits,
    messages,
    closedEvents,
    events: { message: (m) => messages.push(Uint8Array.from(m)), closed: (c, r) => closedEvents.push([c, r]) },
    Ctor: ctor((_url, init) => {
      inits.push(init);
      return session;
    }),
    loseSession: end,
    session,
  };
}

/** A constructor (what `new WebTransport(url, init)` calls) returning `make`'s object. */
function ctor(make: (url: string, init: unknown) => object): never {
  return class {
    constructor(url: string, init: unknown) {
      // biome-ignore lint/correctness/noConstructorReturn: a fake session stands in for the instance
      return make(url, init);
    }
  } as never;
}

const frame = (...bytes: number[]): number[] => [0, 0, 0, bytes.length, ...bytes];
const tick = () => new Promise((r) => setTimeout(r, 0));

describe('webTransportCarrier', () => {
  it('frames each message [u32 BE length][message] and writes the sends of one task with one write()', async () => {
    const f = fake();
    const c = await webTransportCarrier({ WebTransport: f.Ctor })('https://h:1/x', f.events, OPEN);
    expect(c.send(Uint8Array.of(1, 2, 3))).toBe(true);
    expect(c.send(Uint8Array.of(4))).toBe(true);
    expect(c.send(new Uint8Array(0))).toBe(false);
    expect(c.buffered).toBe(12);
    await tick();
    expect(f.written.map((w) => [...w])).toEqual([[...frame(1, 2, 3), ...frame(4)]]);
    expect(c.buffered).toBe(12);
    f.drain();
    await tick();
    expect(c.buffered).toBe(0);
  });

  it('delivers frames split across reads and several per read, whole and in order', async () => {
    const f = fake();
    await webTransportCarrier({ WebTransport: f.Ctor })('https://h:1/x', f.events, OPEN);
    f.push([0, 0]);
    f.push([0, 3, 7, 8]);
    f.push([9, ...frame(1), ...frame(2, 3)]);
    await tick();
    expect(f.messages.map((m) => [...m])).toEqual([[7, 8, 9], [1], [2, 3]]);
  });

  it('refuses a frame over maxMessageSize before allocating it: GOAWAY, END, closed 1009', async () => {
    const f = fake();
    const c = await webTransportCarrier({ WebTransport: f.Ctor })('https://h:1/x', f.events, {
      ...OPEN,
      maxMessageSize: 4096,
    });
    f.push([0x7f, 0xff, 0xff, 0xff, 1, 2]);
    await tick();
    expect(f.messages).toEqual([]);
    expect(f.closedEvents[0]?.[0]).toBe(1009);
    expect(c.send(Uint8Array.of(1))).toBe(false);
    const out = f.written.flatMap((w) => [...w]);
    // GOAWAY then END, and the session stays open for the server's END.
    expect(out.slice(-4)).toEqual([0, 0, 0, 0]);
    expect(out.length).toBeGreaterThan(8);
    expect(f.closes()).toBe(0);
  });

  it('close() writes END after what was sent, reads until the server END, then closes the session', async () => {
    const f = fake();
    const c = await webTransportCarrier({ WebTransport: f.Ctor })('https://h:1/x', f.events, OPEN);
    c.send(Uint8Array.of(5));
    c.close(1000, 'bye');
    expect(f.written.map((w) => [...w])).toEqual([[...frame(5), 0, 0, 0, 0]]);
    f.push(frame(9));
    await tick();
    // Read but not delivered: after a close only the server's END matters.
    expect(f.messages).toEqual([]);
    expect(f.closes()).toBe(0);
    f.push([0, 0, 0, 0]);
    await tick();
    expect(f.closes()).toBe(1);
    expect(f.closedEvents).toEqual([]);
  });

  it("a server's END is answered with ours at once, the session closed, and closed(1000) reported", async () => {
    const f = fake();
    await webTransportCarrier({ WebTransport: f.Ctor })('https://h:1/x', f.events, OPEN);
    f.push([...frame(1), 0, 0, 0, 0]);
    await tick();
    expect(f.messages.map((m) => [...m])).toEqual([[1]]);
    expect(f.written.map((w) => [...w])).toEqual([[0, 0, 0, 0]]);
    expect(f.closes()).toBe(1);
    expect(f.closedEvents.map((e) => e[0])).toEqual([1000]);
  });

  it('a server that never sends END gets closeGraceMs, then the session is closed', async () => {
    const f = fake();
    const c = await webTransportCarrier({ WebTransport: f.Ctor, closeGraceMs: 5 })('https://h:1/x', f.events, OPEN);
    c.close(1000, '');
    await new Promise((r) => setTimeout(r, 20));
    expect(f.closes()).toBe(1);
  });

  it('a lost session is reported as closed(1006)', async () => {
    const f = fake();
    await webTransportCarrier({ WebTransport: f.Ctor })('https://h:1/x', f.events, OPEN);
    f.loseSession();
    await tick();
    expect(f.closedEvents.map((e) => e[0])).toEqual([1006]);
  });

  it('calls a serverCertificateHashes function before every session', async () => {
    const f = fake();
    const sessions = [fake().session, fake().session];
    const inits: unknown[] = [];
    let calls = 0;
    const value = new Uint8Array(32);
    const factory = webTransportCarrier({
      WebTransport: ctor((_url, init) => {
        inits.push(init);
        return sessions[inits.length - 1] as object;
      }),
      serverCertificateHashes: async () => {
        calls++;
        return [{ algorithm: 'sha-256', value }];
      },
    });
    await factory('https://h:1/x', f.events, OPEN);
    await factory('https://h:1/x', f.events, OPEN);
    expect(calls).toBe(2);
    expect(inits[1]).toEqual({ allowPooling: false, serverCertificateHashes: [{ algorithm: 'sha-256', value }] });
  });

  it('rejects with ERR_CONNECT saying why: no WebTransport, a refused handshake, a timeout', async () => {
    const factory = (make: () => object) => webTransportCarrier({ WebTransport: ctor(make) });
    const events = fake().events;
    const g = globalThis as { WebTransport?: unknown };
    const saved = g.WebTransport;
    delete g.WebTransport;
    try {
      await expect(webTransportCarrier()('https://h:1/x', events, OPEN)).rejects.toMatchObject({
        code: 'ERR_CONNECT',
        message: expect.stringContaining('no WebTransport'),
      });
    } finally {
      if (saved !== undefined) g.WebTransport = saved;
    }
    const refused = () => {
      const ready = Promise.reject(new Error('Opening handshake failed.'));
      return { ready, closed: ready, close() {} };
    };
    await expect(factory(refused)('https://h:1/x', events, OPEN)).rejects.toMatchObject({
      code: 'ERR_CONNECT',
      message: expect.stringContaining('Opening handshake failed.'),
    });
    let closed = 0;
    const stalled = () => ({ ready: new Promise(() => {}), closed: new Promise(() => {}), close: () => closed++ });
    await expect(factory(stalled)('https://h:1/x', events, { ...OPEN, timeoutMs: 20 })).rejects.toMatchObject({
      code: 'ERR_CONNECT',
      message: expect.stringContaining('within 20 ms'),
    });
    expect(closed).toBe(1);
  });

  it('a bad option throws ERR_INVALID_CONFIG naming it', () => {
    expect(() => webTransportCarrier({ closeGraceMs: Number.NaN })).toThrow(/closeGraceMs/);
  });
});
