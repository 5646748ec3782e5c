// Server-side admission of a WebSocket server adapter (Deno, Bun) toward a client that stops
// reading: a raw client (node:net, which Deno and Bun both provide) completes the upgrade and then
// reads nothing, so the server's socket buffer fills; admission must start waiting, stay bounded,
// and resume once the client reads. Shared by the Deno and Bun entry files.
import net from 'node:net';
import { expect, it } from 'vitest';
import type { Connection, TransportAdapter } from '../../src/transport/port.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';

const HIGH_WATER_MARK = 64 * 1024;
const MAX_PENDING = 256 * 1024;
const CHUNK = 32 * 1024;

export function wsServerAdmission(
  make: (limits: { highWaterMark: number; maxPendingBytes: number }) => TransportAdapter,
): void {
  it('admission waits while the client does not read, stays bounded, and drains when it reads', async () => {
    const server = make({ highWaterMark: HIGH_WATER_MARK, maxPendingBytes: MAX_PENDING });
    let accepted!: (c: Connection) => void;
    const conn = new Promise<Connection>((r) => (accepted = r));
    const address = await server.listen({
      frameLimit: 1 << 20,
      maxMessageSize: 1 << 20,
      runtime: systemRuntime(),
      accept(c) {
        c.start({ message() {}, closed() {} });
        accepted(c);
      },
    });
    const url = new URL(address as string);
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    try {
      socket.on('error', () => {});
      await new Promise<void>((r) => socket.once('connect', () => r()));
      socket.write(
        `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      let received = 0;
      const onData = (d: Buffer): void => {
        received += d.byteLength;
      };
      socket.on('data', onData);
      const c = await conn;
      // Stop reading: from now on only the kernel buffers take the server's bytes.
      socket.pause();
      let waiting: Promise<void> | undefined;
      let sent = 0;
      for (let i = 0; i < 4096 && waiting === undefined; i++) {
        const a = c.send(new Uint8Array(CHUNK).fill(i & 0xff));
        sent++;
        if (a !== true) {
          // The first wait may still clear while kernel buffers autotune; keep going until one sticks.
          const stuck = await Promise.race([
            a.then(() => false),
            new Promise<boolean>((r) => setTimeout(() => r(true), 150)),
          ]);
          if (stuck) waiting = a;
        }
      }
      expect(waiting, 'admission never waited: the server queues without bound').toBeDefined();
      // Bounded: what the adapter holds is at most the high-water mark, one message and the pending queue.
      expect(c.bufferedAmount()).toBeLessThanOrEqual(HIGH_WATER_MARK + CHUNK + MAX_PENDING);
      // Reading again drains the socket and lets admission continue.
      socket.resume();
      await waiting;
      const more = c.send(new Uint8Array(8));
      if (more !== true) await more;
      const total = sent * (CHUNK + 4); // at most 4 bytes of WebSocket header per 32 KiB message
      const deadline = performance.now() + 5_000;
      while (received < sent * CHUNK && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      expect(received).toBeGreaterThanOrEqual(sent * CHUNK);
      expect(received).toBeLessThanOrEqual(total + 1024);
    } finally {
      socket.destroy();
      await server.close();
    }
  });
}
