/**
 * The page's WebTransport client, for the Deno engine. Loaded on demand by `main.ts` so the
 * WebSocket path does not carry it.
 */
import { LanemuxError } from '../src/errors.ts';
import { certificateHashFromHex } from '../src/adapters/dev-cert.ts';
import type { TransportAdapter } from '../src/transport/port.ts';
import { webTransportClientTransport } from '../src/adapters/webtransport.ts';
import type { EngineInfo } from './protocol.ts';

/** A WebTransport client adapter that trusts the engine's self-signed certificate by its hash. */
export function webTransportFor(info: EngineInfo): TransportAdapter {
  if (typeof (globalThis as { WebTransport?: unknown }).WebTransport !== 'function') {
    throw new LanemuxError(
      'ERR_UNSUPPORTED_RUNTIME',
      'this browser has no WebTransport (or the page is not a secure context: use http://127.0.0.1 or localhost)',
    );
  }
  return webTransportClientTransport({ serverCertificateHashes: (info.certHashes ?? []).map(certificateHashFromHex) });
}
