// yamux (@chainsafe/libp2p-yamux 8, a dev dependency) straight over a node:net socket: no libp2p,
// no upgrader, no encryption. In libp2p v3 a muxer takes a `MessageStream`; @libp2p/utils's
// AbstractMultiaddrConnection implements its state machine, so a socket needs only the five
// send* hooks and to feed what it reads to onData() (as @libp2p/tcp's socket-to-conn does).
import { yamux } from '@chainsafe/libp2p-yamux';
import { defaultLogger } from '@libp2p/logger';
import { AbstractMultiaddrConnection } from '@libp2p/utils';
import { multiaddr } from '@multiformats/multiaddr';

class SocketConn extends AbstractMultiaddrConnection {
  constructor(socket, direction) {
    super({
      log: defaultLogger().forComponent(`bench:yamux:${direction}`),
      direction,
      remoteAddr: multiaddr(`/ip4/127.0.0.1/tcp/${socket.remotePort ?? 0}`),
    });
    this.socket = socket;
    socket.on('data', (buf) => this.onData(buf));
    socket.on('drain', () => this.safeDispatchEvent('drain'));
    socket.on('error', (err) => this.abort(err));
    socket.once('close', () => this.onTransportClosed());
  }
  sendData(data) {
    let sentBytes = 0;
    let canSendMore = true;
    for (const buf of data) {
      sentBytes += buf.byteLength;
      canSendMore = this.socket.write(buf);
      if (!canSendMore) break;
    }
    return { sentBytes, canSendMore };
  }
  async sendClose() {
    if (!this.socket.destroyed) this.socket.end();
  }
  sendReset() {
    this.socket.destroy();
  }
  sendPause() {
    this.socket.pause();
  }
  sendResume() {
    this.socket.resume();
  }
}

/** A yamux muxer over `socket` ('inbound' on the accepting side). Stream limits are raised for 1,000+ streams. */
export function yamuxOver(socket, direction, init = {}) {
  const factory = yamux({ maxInboundStreams: 1e6, maxOutboundStreams: 1e6, ...init })();
  return factory.createStreamMuxer(new SocketConn(socket, direction));
}

/** A yamux message (Uint8Array or Uint8ArrayList) as one contiguous Buffer. */
export function messageBytes(d) {
  const u8 = d instanceof Uint8Array ? d : d.subarray();
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}
