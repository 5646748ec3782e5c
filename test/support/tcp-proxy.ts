/**
 * A TCP proxy on loopback that plays the network between two nodes: `cut()` destroys both ends of every
 * connection (a lost link), `severDialler()` only the dialler's (the acceptor keeps a half-open, silent socket).
 * `closeProxies()` in `afterEach` releases every proxy and socket.
 */
import net from 'node:net';

interface Pair {
  front: net.Socket;
  back: net.Socket;
}

export interface TcpProxy {
  /** `tcp://127.0.0.1:<port>`: dial this instead of the target. */
  readonly address: string;
  /** Destroy both ends of every open connection. */
  cut(): void;
  /** Destroy the dialler's end of every open connection; the target's end stays open and silent. */
  severDialler(): void;
}

const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();

/** A proxy to `127.0.0.1:<target>`; `onAccept` is called as each connection comes in. */
export async function tcpProxy(target: number, onAccept?: () => void): Promise<TcpProxy> {
  const pairs: Pair[] = [];
  const severed = new Set<Pair>();
  const server = net.createServer((front) => {
    onAccept?.();
    const back = net.connect(target, '127.0.0.1');
    sockets.add(front).add(back);
    const pair = { front, back };
    pairs.push(pair);
    front.pipe(back);
    back.pipe(front);
    front.on('error', () => {});
    back.on('error', () => {});
    front.on('close', () => {
      sockets.delete(front);
      if (!severed.has(pair)) back.destroy();
    });
    back.on('close', () => {
      // Closed sockets are forgotten: a long run with many cuts keeps none of them.
      sockets.delete(back);
      severed.delete(pair);
      const i = pairs.indexOf(pair);
      if (i >= 0) pairs.splice(i, 1);
      front.destroy();
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: `tcp://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut(): void {
      for (const p of pairs.splice(0)) {
        p.front.destroy();
        p.back.destroy();
      }
    },
    severDialler(): void {
      for (const p of pairs.splice(0)) {
        severed.add(p);
        p.front.unpipe(p.back);
        p.back.unpipe(p.front);
        p.front.destroy();
      }
    },
  };
}

/** Destroy every proxied socket (severed ones included) and close every proxy. */
export async function closeProxies(): Promise<void> {
  for (const s of sockets) s.destroy();
  sockets.clear();
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
}
