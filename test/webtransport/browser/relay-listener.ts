// Test-only adapter: the listening side of the conformance suite in a browser, through
// relay-server.deno.ts (see there). Each relayed session becomes one WtSessionLanes and each relayed
// stream one WtStreamConn: the same lane code as the product adapters, on server-opened streams.
import { TransportError } from '../../../src/transport/errors.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../../../src/transport/port.ts';
import { WtSessionLanes, WtStreamConn, type WtBidiStream } from '../../../src/adapters/webtransport-stream.ts';
import type { WebTransportHash } from '../../../src/adapters/webtransport.ts';

interface BrowserSession {
  readonly ready: Promise<unknown>;
  readonly closed: Promise<unknown>;
  readonly incomingBidirectionalStreams: ReadableStream<WtBidiStream>;
  createBidirectionalStream(): Promise<WtBidiStream>;
  close(info?: { closeCode?: number; reason?: string }): void;
}
type Ctor = new (url: string, o: { serverCertificateHashes: WebTransportHash[] }) => BrowserSession;

export interface RelayListenerOptions {
  readonly relay: string;
  readonly id: string;
  readonly hashes: WebTransportHash[];
  readonly highWaterMark: number;
  readonly maxPendingBytes: number;
  readonly closeGraceMs: number;
}

export function relayListenerTransport(o: RelayListenerOptions): TransportAdapter {
  const ctor = (globalThis as unknown as { WebTransport: Ctor }).WebTransport;
  const open = (path: string): BrowserSession => {
    const s = new ctor(`${o.relay}${path}`, { serverCertificateHashes: o.hashes });
    s.ready.catch(() => {});
    s.closed.catch(() => {});
    return s;
  };
  const sessions = new Set<WtSessionLanes<BrowserSession>>();
  let control: BrowserSession | undefined;
  let controlWriter: WritableStreamDefaultWriter<Uint8Array> | undefined;
  let closed = false;

  async function accept(k: number, host: ListenHost): Promise<void> {
    const s = open(`/accept/${o.id}/${k}`);
    await s.ready;
    const lanes: WtSessionLanes<BrowserSession> = new WtSessionLanes(
      s,
      `${o.relay}/accept/${o.id}/${k}`,
      o.closeGraceMs,
      host.runtime,
      () => {
        sessions.delete(lanes);
      },
    );
    sessions.add(lanes);
    if (closed) lanes.close();
    const reader = s.incomingBidirectionalStreams.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done || value === undefined || !lanes.usable) return;
      host.accept(
        new WtStreamConn(
          value,
          lanes.label,
          host.frameLimit,
          { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes },
          lanes,
        ),
      );
    }
  }

  return {
    name: 'relay-listener',
    dialSchemes: [],
    async listen(host: ListenHost): Promise<string> {
      control = open(`/listen/${o.id}`);
      await control.ready;
      const ctl = await control.createBidirectionalStream();
      const w = ctl.writable.getWriter();
      controlWriter = w;
      void w.write(Uint8Array.of(0)).catch(() => {}); // makes the stream exist at the relay
      const reader = ctl.readable.getReader();
      let registered!: () => void;
      const isRegistered = new Promise<void>((r) => (registered = r));
      void (async () => {
        let buf = new Uint8Array(0);
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done || value === undefined) return;
            const all = new Uint8Array(buf.byteLength + value.byteLength);
            all.set(buf, 0);
            all.set(value, buf.byteLength);
            let off = 0;
            for (; off + 4 <= all.byteLength; off += 4) {
              const k = new DataView(all.buffer, all.byteOffset + off, 4).getUint32(0);
              if (k === 0) registered();
              else accept(k, host).catch(() => {});
            }
            buf = all.slice(off);
          }
        } catch {
          // control session closed
        }
      })();
      await isRegistered;
      return `${o.relay}/dial/${o.id}`;
    },
    dial(request: DialRequest, events: DialEvents): DialHandle {
      queueMicrotask(() =>
        events.fail(new TransportError('ERR_UNSUPPORTED_ADDRESS', `relay listener does not dial ${request.address}`)),
      );
      return { close() {} };
    },
    async close(): Promise<void> {
      closed = true;
      // Goodbye in band first (the relay stops announcing dials to us), then close the session.
      await controlWriter?.write(Uint8Array.of(1)).catch(() => {});
      try {
        control?.close();
      } catch {
        // already closed
      }
      const all = [...sessions];
      for (const s of all) s.update();
      await Promise.all(
        all.map(
          (s) =>
            new Promise<void>((resolve) => {
              const t = setTimeout(() => {
                s.close();
                resolve();
              }, o.closeGraceMs + 100);
              void s.closedPromise.then(() => {
                clearTimeout(t);
                resolve();
              });
            }),
        ),
      );
    },
  };
}
