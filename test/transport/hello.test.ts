// The HELLO exchange: a WebSocket server bounds what it buffers before HELLO, and the session
// field carries any integer up to 2^53-1 (docs/protocol.md §3.1).
import { encode } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createMessenger } from '../../src/messenger/messenger.ts';
import { decodeHello, encodeHello } from '../../src/transport/hello.ts';
import { PROTOCOL_VERSION } from '../../src/transport/port.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { messengerFixture, rawPeer } from './raw-peer.ts';

const { open, sockets, tcpMessenger: tcpNode } = messengerFixture(afterEach);

describe('WebSocket server pre-HELLO limit', () => {
  it('closes with 1009 as soon as a first message passes 4 KiB, without buffering up to maxMessageSize', async () => {
    const a = await createMessenger({
      transports: [webSocketServerTransport()],
      healthCheck: false,
      maxMessageSize: 64 * 1024 * 1024,
    });
    open.push(a);
    const ws = new WebSocket(a.addresses[0]!);
    try {
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      ws.on('error', () => {});
      const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
      let isClosed = false;
      void closed.then(() => {
        isClosed = true;
      });
      // One unfinished message in 1 MiB fragments: before the fix ws buffered all 48 MiB of it.
      const chunk = Buffer.alloc(1024 * 1024, 0xf0);
      let sent = 0;
      for (; sent < 48 && !isClosed && ws.readyState === WebSocket.OPEN; sent++) {
        await new Promise<void>((r) => ws.send(chunk, { binary: true, fin: false }, () => r()));
      }
      expect(await within(closed, 5_000, 'the server closing the socket')).toBe(1009);
      expect(sent).toBeLessThanOrEqual(4);
    } finally {
      ws.terminate();
    }
  });
});

describe('HELLO session range (docs/protocol.md §3.1)', () => {
  it('accepts sessions up to 2^53-1 whether sent as uint64 or as float64, and sends them as uint64', () => {
    const base = {
      protocolVersion: PROTOCOL_VERSION,
      worker: '0123456789abcdef',
      instance: 'a1',
      lane: 0,
      lanes: 1,
      maxMessageSize: 1 << 20,
      keys: [],
    };
    for (const session of [0, 1, 0xffffffff, 2 ** 32, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
      const bytes = encodeHello({ ...base, session });
      const h = decodeHello(bytes, PROTOCOL_VERSION);
      expect(h, String(session)).toMatchObject({ session });
      if (session > 0xffffffff) expect(Array.from(bytes)).toContain(0xcf);
      // The same map with the session as an integral float64, as some encoders write it.
      const body = encode(
        {
          worker: base.worker,
          instance: 'a1',
          session: session + 0.0,
          lane: 0,
          lanes: 1,
          maxMessageSize: 1 << 20,
          keys: [],
        },
        { forceIntegerToFloat: true },
      );
      const asFloat = new Uint8Array([...bytes.subarray(0, 6), ...body]);
      expect(decodeHello(asFloat, PROTOCOL_VERSION), `float ${session}`).toMatchObject({ session });
    }
    const tooBig = encode(
      { worker: base.worker, instance: 'a1', session: 2n ** 53n, lane: 0, lanes: 1, maxMessageSize: 1 << 20, keys: [] },
      { useBigInt64: true },
    );
    expect(
      decodeHello(
        new Uint8Array([...encodeHello({ ...base, session: 1 }).subarray(0, 6), ...tooBig]),
        PROTOCOL_VERSION,
      ),
    ).toMatchObject({ code: 'ERR_MALFORMED_ENVELOPE' });
  });

  it('a peer dialling with a session above 2^32-1 is answered with the same session', async () => {
    const a = await tcpNode();
    const raw = await rawPeer(a.addresses[0]!, sockets, { session: 2 ** 40 });
    await waitFor(() => raw.frames.length >= 1, 5_000, 'the HELLO answer');
    expect(decodeHello(raw.frames[0]!, PROTOCOL_VERSION)).toMatchObject({ session: 2 ** 40, worker: a.self.id });
    await waitFor(() => a.peers().length === 1, 5_000, 'the link');
  });
});
