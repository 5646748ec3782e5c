/**
 * WebTransport first, WebSocket when it must: the carrier a page gives `connect` when its server
 * listens on both (the node's full version is `browserClientTransport`).
 *
 * A connect (or reconnect) tries WebTransport at the URL given to `connect`, unless the page has no
 * `WebTransport` or fell back recently. WebSocket at `webSocketUrl` is tried instead when the session
 * does not open within `webTransportTimeoutMs`, or opens but closes before the server said anything
 * (a middlebox that lets the handshake through and nothing else): then what was sent on it (the
 * HELLO) is sent again on the WebSocket, and the link never sees the switch. After a fallback that
 * worked, connects stay on WebSocket for `webTransportRetryMs`; a live WebSocket is never torn down
 * to go back.
 */
import { ConfigError } from '../errors.ts';
import { TransportError, describeThrown } from '../transport/errors.ts';
import {
  type Carrier,
  type CarrierEvents,
  type CarrierFactory,
  type WebSocketConstructor,
  webSocketCarrier,
} from './carrier.ts';
import { type WebTransportCarrierOptions, webTransportCarrier } from './webtransport.ts';

/** What {@link BrowserCarrierOptions.onTransport} is told. */
export interface TransportEvent {
  /** The transport the server answered on. */
  readonly transport: 'webtransport' | 'websocket';
  /** The URL that carries the link. */
  readonly url: string;
  /** Why not WebTransport, when `transport` is `'websocket'`. */
  readonly reason?: string;
}

/** Options of {@link browserCarrier}. */
export interface BrowserCarrierOptions {
  /** How to reach the server over WebTransport. Defaults to `{}` (the global `WebTransport`, a CA-signed certificate). */
  readonly webTransport?: WebTransportCarrierOptions;
  /** The server's WebSocket endpoint (`ws://`, `wss://`). Required. */
  readonly webSocketUrl: string;
  /** The WebSocket constructor. Defaults to the global one. */
  readonly WebSocket?: WebSocketConstructor;
  /** Time a WebTransport session has to open before WebSocket is tried (ms; at most `connectTimeoutMs`). Defaults to 4,000. */
  readonly webTransportTimeoutMs?: number;
  /** After a fallback, how long connects stay on WebSocket (ms). Defaults to 300,000. */
  readonly webTransportRetryMs?: number;
  /** Called when the server first answers over a transport other than the last one reported. Defaults to none. */
  readonly onTransport?: (event: TransportEvent) => void;
}

/** The fallback carrier factory: give it to `connect` as `transport`, with the WebTransport URL. */
export function browserCarrier(o: BrowserCarrierOptions): CarrierFactory {
  if (!/^wss?:\/\//i.test(String(o?.webSocketUrl)))
    throw new ConfigError('webSocketUrl', 'webSocketUrl must be a ws:// or wss:// URL', { where: 'browserCarrier' });
  const wt = webTransportCarrier(o.webTransport);
  const ws = webSocketCarrier(o.WebSocket);
  const wsUrl = o.webSocketUrl;
  let fellBackAt = Number.NEGATIVE_INFINITY;
  let fallbackWhy = '';
  let reported = '';
  return async (url, events, open) => {
    const rt = open.runtime;
    const timeoutMs = open.timeoutMs;
    let inner: Carrier | null = null;
    let heard = false;
    let done = false;
    /** Why WebTransport was not used by this carrier ('' while it is). */
    let why = '';
    /** WebTransport was tried by this carrier and failed: a fallback, if WebSocket works. */
    let tried = false;
    /** Copies of what was sent before the server answered: sent again after a switch. */
    const early: Uint8Array[] = [];
    const proxy: Carrier = {
      send(m) {
        if (done) return false;
        if (!heard) early.push(m.slice());
        // While switching, what is sent waits in `early`.
        return inner === null || inner.send(m);
      },
      get buffered() {
        return inner?.buffered ?? 0;
      },
      close(code, reason) {
        done = true;
        inner?.close(code, reason);
      },
    };
    const on = (transport: TransportEvent['transport']): CarrierEvents => ({
      message(m) {
        if (!heard) {
          heard = true;
          early.length = 0;
          if (tried) {
            fellBackAt = rt.now();
            fallbackWhy = why;
          }
          if (reported !== transport) {
            reported = transport;
            o.onTransport?.({ transport, url: why ? wsUrl : url, ...(why && { reason: why }) });
          }
        }
        events.message(m);
      },
      closed(code, reason) {
        if (done) return;
        if (heard || why !== '') {
          done = true;
          events.closed(code, reason);
          return;
        }
        inner = null;
        tried = true;
        why = `WebTransport closed before the server answered (${code}${reason && `: ${reason}`})`;
        viaWebSocket().then(
          (c) => {
            if (done) return c.close(1000, 'closed');
            inner = c;
            for (const m of early) c.send(m);
          },
          (e: unknown) => {
            done = true;
            events.closed(1006, describeThrown(e));
          },
        );
      },
    });
    const viaWebSocket = (): Promise<Carrier> =>
      ws(wsUrl, on('websocket'), open).catch((e: unknown) => {
        throw new TransportError('ERR_CONNECT', `${why}; ${describeThrown(e)}`, { retryable: true, cause: e });
      });
    if (!(o.webTransport?.WebTransport ?? (globalThis as { WebTransport?: unknown }).WebTransport))
      why = 'this page has no WebTransport';
    else if (rt.now() - fellBackAt < (o.webTransportRetryMs ?? 300_000)) why = fallbackWhy;
    else {
      try {
        inner = await wt(url, on('webtransport'), {
          ...open,
          timeoutMs: Math.min(o.webTransportTimeoutMs ?? 4000, timeoutMs),
        });
        return proxy;
      } catch (e) {
        tried = true;
        why = `WebTransport failed: ${describeThrown(e)}`;
      }
    }
    inner = await viaWebSocket();
    return proxy;
  };
}
