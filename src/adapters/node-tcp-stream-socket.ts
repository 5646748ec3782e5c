/**
 * Socket helpers both sides of a `tcp-stream` connection use: the reset that makes a teardown an
 * error at the other end, and the peer name errors carry.
 *
 * @packageDocumentation
 */
import type net from 'node:net';

/**
 * Abort a socket with an RST, so the other side sees an error rather than a clean FIN. Only while
 * our write side is open: libuv refuses to reset a socket that is shutting down (EINVAL), and Node
 * then never closes the handle (no 'close', a leaked fd). Once we sent a FIN, a plain destroy it is.
 */
export function reset(socket: net.Socket): void {
  if (socket.destroyed) return;
  if (socket.writableEnded) {
    socket.destroy();
    return;
  }
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

/** `address:port` of the other end, for error messages. */
export function peerOf(socket: net.Socket): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
}
