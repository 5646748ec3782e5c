// Browser entry (bundled by vite's dev server in chromium.test.ts): exposes the WebTransport runs on
// `globalThis.lanemuxWt` for playwright's page.evaluate.
import { certificateHashFromHex } from '../../../src/adapters/dev-cert.ts';
import { webTransportClientTransport } from '../../../src/adapters/webtransport.ts';
import { runBench, type BenchResult } from './bench.ts';

export interface BrowserApi {
  bench(o: { address: string; hashHex: string; lanes: number; rtts: number; messages: number }): Promise<BenchResult>;
  /** Connect once (no reconnect) with the given hash and report how it ends (code and message of the error, or 'connected'). */
  tryConnect(o: { address: string; hashHex: string }): Promise<string>;
}

const api: BrowserApi = {
  bench: (o) =>
    runBench({
      ...o,
      transport: () => webTransportClientTransport({ serverCertificateHashes: [certificateHashFromHex(o.hashHex)] }),
    }),
  async tryConnect(o) {
    const { createMessenger } = await import('../../../src/messenger/messenger.ts');
    const m = await createMessenger({
      transports: [
        webTransportClientTransport({
          serverCertificateHashes: [certificateHashFromHex(o.hashHex)],
          connectTimeoutMs: 5_000,
        }),
      ],
      healthCheck: false,
      reconnect: false,
    });
    try {
      await m.connect(o.address, { timeoutMs: 6_000 });
      return 'connected';
    } catch (e) {
      return `${(e as { code?: string }).code ?? 'no code'}: ${(e as Error).message}`;
    } finally {
      await m.close();
    }
  },
};
(globalThis as { lanemuxWt?: BrowserApi }).lanemuxWt = api;
