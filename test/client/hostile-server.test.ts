// lanemux/client against a server that breaks the protocol on purpose (a hand-written peer on a raw
// `ws` server): every fault ends at most the stream it names, with a clear error; the connection and
// the page's other streams carry on; nothing is kept for a slot the page does not know.
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { connect, isLanemuxError, type Client } from '../../src/client.ts';
import { Kind } from '../../src/messenger/envelope.ts';
import { parseTicket } from '../../src/stream/ticket.ts';
import { decodeHello, encodeHello } from '../../src/transport/hello.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { BatchEncoder } from '../../src/wire/encoder.ts';
import { decodeBounded, encodeShared } from '../../src/wire/msgpack.ts';
import { waitFor } from '../support/wait-for.ts';

const servers: WebSocketServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const s of servers.splice(0)) {
    for (const c of s.clients) c.terminate();
    await new Promise((r) => s.close(r));
  }
});

/** A raw peer: answers the page's HELLO (or with `hello`'s fields), then lets the test write messages. */
async function rawServer(hello: Record<string, unknown> = {}) {
  const wss = new WebSocketServer({ port: 0 });
  servers.push(wss);
  await new Promise((r) => wss.once('listening', r));
  const received: Uint8Array[] = [];
  let socket!: WebSocket;
  const ready = new Promise<void>((resolve) => {
    wss.on('connection', (ws) => {
      socket = ws;
      ws.on('message', (data: Buffer) => {
        const m = new Uint8Array(data);
        if (m[0] === 0xf0) {
          const h = decodeHello(m, 1);
          if (isLanemuxError(h)) throw h;
          const answer = encodeHello({
            protocolVersion: 1,
            worker: 'aaaaaaaaaaaaaaaa',
            instance: 'raw',
            session: h.session,
            lane: 0,
            lanes: 1,
            maxMessageSize: 1 << 20,
            keys: ['lanemux-resume-v1', 'messenger-mux-v2'],
            claim: 'ab'.repeat(16),
          });
          ws.send(Object.keys(hello).length > 0 ? patchHello(answer, hello) : answer);
          resolve();
        } else received.push(m);
      });
    });
  });
  const url = `ws://127.0.0.1:${(wss.address() as { port: number }).port}/`;
  return {
    url,
    ready,
    received,
    send: (m: Uint8Array) => socket.send(m),
    /** Batches the page sent (envelope stripped), decoded. */
    batches: () => received.filter((m) => m[0] === Kind.Batch).map((m) => decodeBatch(m.subarray(1))),
  };
}

/** The answer HELLO with some fields replaced. */
function patchHello(answer: Uint8Array, fields: Record<string, unknown>): Uint8Array {
  const body = { ...(decodeBounded(answer.subarray(6)) as object), ...fields };
  const b = encodeShared(body);
  const out = new Uint8Array(6 + b.byteLength);
  out.set(answer.subarray(0, 6));
  out.set(b, 6);
  return out;
}

async function page(url: string, options: Parameters<typeof connect>[1] = {}): Promise<Client> {
  const c = await connect(url, { WebSocket: WebSocket as never, initialCredit: 4, ...options });
  clients.push(c);
  return c;
}

/** A batch from the server: `fill` appends its records. */
let seq = 0;
function batch(fill: (e: BatchEncoder) => void): Uint8Array {
  const e = new BatchEncoder();
  e.begin(1n, seq++);
  fill(e);
  const b = e.finish();
  const out = new Uint8Array(1 + b.byteLength);
  out[0] = Kind.Batch;
  out.set(b, 1);
  return out;
}

/** An anchor of the page, its ticket opened by the raw server on `slot` with `n` items. */
function open(client: Client, slot: number, items: string[]) {
  const anchor = client.anchor<string>();
  const t = parseTicket(client.ticket(anchor));
  const msg = batch((e) => {
    e.appendOpenSlot(slot, 0, t.anchor_id!, t.routing_session_id);
    items.forEach((s, i) => e.appendItemString(slot, i + 1, s));
  });
  return { anchor, msg, session: t.routing_session_id };
}

describe('lanemux/client against a hostile server', () => {
  it('a record beyond the credit ends only its stream (ProtocolError back); the other stream and the link go on', async () => {
    const srv = await rawServer();
    const client = await page(srv.url);
    await srv.ready;
    const bad = open(client, 1, ['a', 'b', 'c', 'd', 'e', 'f']); // C = 4, one terminal reserve: 'f' is over
    const good = open(client, 2, ['x']);
    srv.send(bad.msg);
    srv.send(good.msg);
    // Read nothing until the fault: no credit goes back meanwhile, so C = 4 records is all that fits.
    await waitFor(() => client.metrics()['streaming_mux_protocol_errors_total'] === 1, 5000, 'the overspend');
    expect((await bad.anchor.next()).value).toBe('a');
    const rest: string[] = [];
    const err = await (async () => {
      try {
        for (;;) {
          const r = await bad.anchor.next();
          if (r.done) return null;
          rest.push(r.value);
        }
      } catch (e) {
        return e;
      }
    })();
    expect(rest).toEqual(['b', 'c', 'd']);
    expect(err).toMatchObject({ code: 'ERR_TRANSPORT_ERROR' });
    expect(String((err as Error).message)).toContain('credit');
    expect((await good.anchor.next()).value).toBe('x');
    await waitFor(
      () => srv.batches().some((b) => b.records.some((r) => r.type === 2 && r.slot === 1 && r.closeReason === 3)),
      5000,
      'CloseSlot{ProtocolError} for slot 1',
    );
    expect(client.connected).toBe(true);
  });

  it('records for unknown slots and a truncated batch are dropped and counted; nothing is answered for them', async () => {
    const srv = await rawServer();
    const client = await page(srv.url);
    await srv.ready;
    srv.send(batch((e) => e.appendItemString(77, 1, 'stray')));
    const truncated = batch((e) => e.appendItemString(78, 1, 'cut'));
    srv.send(truncated.subarray(0, truncated.byteLength - 2));
    const ok = open(client, 3, ['y']);
    srv.send(ok.msg);
    expect((await ok.anchor.next()).value).toBe('y');
    expect(client.metrics()['streaming_mux_no_route_total']).toBe(2);
    expect(
      srv
        .batches()
        .flatMap((b) => b.records)
        .filter((r) => r.slot === 77 || r.slot === 78),
    ).toEqual([]);
  });

  it('an OpenSlot naming no ticket of the page is refused with CloseSlot{UnknownSlot}', async () => {
    const srv = await rawServer();
    await page(srv.url);
    await srv.ready;
    srv.send(batch((e) => e.appendOpenSlot(9, 0, 123n, 456n)));
    await waitFor(
      () => srv.batches().some((b) => b.records.some((r) => r.type === 2 && r.slot === 9 && r.closeReason === 2)),
      5000,
      'CloseSlot{UnknownSlot}',
    );
  });

  it('reading returns credit once the producer may hold no more than C/2, at most one CreditUpdate per slot per batch', async () => {
    const srv = await rawServer();
    const client = await page(srv.url);
    await srv.ready;
    const s = open(client, 4, ['1', '2', '3', '4']);
    srv.send(s.msg);
    expect((await s.anchor.next()).value).toBe('1');
    await waitFor(() => srv.batches().length > 0, 5000, 'a grant');
    for (let i = 0; i < 3; i++) await s.anchor.next();
    await new Promise((r) => setTimeout(r, 20));
    const batches = srv.batches();
    for (const b of batches) {
      const slots = b.records.filter((r) => r.type === 3).map((r) => r.slot);
      expect(new Set(slots).size).toBe(slots.length);
    }
    // C = 4, all four records arrived and were read: credit comes back while the producer holds ≤ 2.
    const granted = batches
      .flatMap((b) => b.records.filter((r) => r.type === 3 && r.slot === 4))
      .reduce((n, r) => n + r.creditDelta!, 0);
    expect(granted).toBe(3);
  });

  it('a server HELLO that breaks a rule fails connect with ERR_MALFORMED_ENVELOPE naming the field', async () => {
    const srv = await rawServer({ maxMessageSize: 12 });
    await expect(connect(srv.url, { WebSocket: WebSocket as never })).rejects.toMatchObject({
      code: 'ERR_MALFORMED_ENVELOPE',
      message: expect.stringContaining('maxMessageSize'),
    });
  });

  it('a message over the page’s maxMessageSize closes the link with ERR_FRAME_TOO_LARGE, and streams wait for resume', async () => {
    const srv = await rawServer();
    const client = await connect(srv.url, {
      WebSocket: WebSocket as never,
      maxMessageSize: 4096,
      reconnectDelayMs: 60_000,
    });
    clients.push(client);
    await srv.ready;
    const states: string[] = [];
    client.onState((s, e) => states.push(`${s}:${e?.code ?? ''}`));
    srv.send(new Uint8Array(8192).fill(1));
    await waitFor(() => states.length > 0, 5000, 'the link went down');
    expect(states[0]).toBe('down:ERR_FRAME_TOO_LARGE');
  });

  it('a producer that goes silent is dropped by the watchdog after three heartbeat windows', async () => {
    const srv = await rawServer();
    const client = await page(srv.url, { heartbeatIntervalMs: 100 });
    await srv.ready;
    const s = open(client, 5, ['only']);
    srv.send(s.msg);
    expect((await s.anchor.next()).value).toBe('only');
    await expect(s.anchor.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(client.metrics()['velo_streaming_heartbeat_watchdog_firings_total']).toBe(1);
    await waitFor(
      () => srv.batches().some((b) => b.records.some((r) => r.type === 2 && r.slot === 5 && r.closeReason === 2)),
      5000,
      'CloseSlot{UnknownSlot} to the silent producer',
    );
  });

  it('bytes the page read are released to the server with _stream_window once a quarter window is due', async () => {
    const srv = await rawServer();
    const client = await page(srv.url, { receiveWindow: 65_536, initialCredit: 64 });
    await srv.ready;
    const big = 'x'.repeat(1000);
    const s = open(
      client,
      6,
      Array.from({ length: 40 }, () => big),
    );
    srv.send(s.msg);
    for (let i = 0; i < 40; i++) await s.anchor.next();
    const name = new TextEncoder().encode('_stream_window');
    const reports = () =>
      srv.received.filter(
        (m) => m[0] === Kind.Message && m[1] === name.byteLength && m.byteLength === 2 + name.byteLength + 8,
      );
    await waitFor(() => reports().length > 0, 5000, 'a window report');
    const released = reports().reduce(
      (n, m) => n + Number(new DataView(m.buffer, m.byteOffset + 2 + name.byteLength).getBigUint64(0)),
      0,
    );
    // 40 records of about 1 KiB were read: at least a quarter window (16 KiB) went back, never more than arrived.
    expect(released).toBeGreaterThanOrEqual(16_384);
    expect(released).toBeLessThanOrEqual(40 * 1010);
  });
});
