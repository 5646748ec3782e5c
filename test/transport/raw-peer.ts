// A minimal raw lanemux peer over loopback TCP for hostile-peer tests: connect, optionally HELLO,
// then write arbitrary length-prefixed messages. Callers destroy `socket` (or pass a `sockets` list).
import net from 'node:net';
import { encodeHello, type Hello } from '../../src/transport/hello.ts';
import { PROTOCOL_VERSION } from '../../src/transport/port.ts';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';

export interface RawPeer {
  readonly socket: net.Socket;
  /** Every message received so far (without the 4-byte length prefix). */
  readonly frames: Uint8Array[];
  /** Resolves when the socket closes. */
  readonly closed: Promise<void>;
  /** Write one message with its u32 big-endian length prefix. */
  send(message: Uint8Array): void;
}

/** `message` with its u32 big-endian length prefix. */
export function lengthPrefixed(message: Uint8Array): Buffer {
  const b = Buffer.alloc(4 + message.byteLength);
  b.writeUInt32BE(message.byteLength, 0);
  b.set(message, 4);
  return b;
}

/** Connect to a `tcp://` address; with `hello`, send a lane-0 HELLO (fields overridable). */
export async function rawPeer(
  address: string,
  sockets: net.Socket[],
  hello: Partial<Hello> | false = {},
): Promise<RawPeer> {
  const u = new URL(address);
  const socket = net.connect({ host: u.hostname, port: Number(u.port) });
  sockets.push(socket);
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  const frames: Uint8Array[] = [];
  let buf = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 4) {
      const n = buf.readUInt32BE(0);
      if (buf.length < 4 + n) break;
      frames.push(new Uint8Array(buf.subarray(4, 4 + n)));
      buf = buf.subarray(4 + n);
    }
  });
  const send = (message: Uint8Array): void => {
    socket.write(lengthPrefixed(message));
  };
  if (hello !== false) {
    send(
      encodeHello({
        protocolVersion: PROTOCOL_VERSION,
        worker: 'abcdefabcdefabcd',
        instance: 'raw',
        session: 1,
        lane: 0,
        lanes: 1,
        maxMessageSize: 1 << 20,
        keys: [],
        ...hello,
      }),
    );
  }
  return { socket, frames, closed, send };
}

/**
 * Messengers and raw sockets a test file opens, closed after each test: call once at module
 * level, then use `tcpMessenger` and push raw sockets into `sockets`.
 */
export function messengerFixture(afterEach: (fn: () => Promise<void>) => void): {
  open: Messenger[];
  sockets: net.Socket[];
  tcpMessenger(extra?: Partial<MessengerOptions>, listen?: boolean): Promise<Messenger>;
} {
  const open: Messenger[] = [];
  const sockets: net.Socket[] = [];
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await Promise.all(open.splice(0).map((m) => m.close()));
  });
  return {
    open,
    sockets,
    async tcpMessenger(extra = {}, listen = true) {
      const m = await createMessenger({
        transports: [tcpTransport({ listen, closeGraceMs: 200 })],
        healthCheck: false,
        ...extra,
      });
      open.push(m);
      return m;
    },
  };
}
