// The Prometheus endpoint under `Deno.serve(prometheusHandler(node))`, the shared suite.
import { prometheusSuite } from '../../metrics/prometheus-suite.ts';

declare const Deno: {
  serve(
    options: { port: number; hostname: string; onListen?: () => void },
    handler: (request: Request) => Response,
  ): { addr: { port: number }; shutdown(): Promise<void>; finished: Promise<void> };
};

prometheusSuite('Deno.serve', async (handler) => {
  const server = Deno.serve({ port: 0, hostname: '127.0.0.1', onListen: () => {} }, handler);
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
});
