// The Prometheus endpoint under `Bun.serve({ fetch: prometheusHandler(node) })`, the shared suite.
import { prometheusSuite } from '../../metrics/prometheus-suite.ts';

declare const Bun: {
  serve(options: { port: number; hostname: string; fetch: (request: Request) => Response }): {
    port: number;
    stop(force?: boolean): Promise<void> | void;
  };
};

prometheusSuite('Bun.serve', async (handler) => {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: handler });
  return { url: `http://127.0.0.1:${server.port}`, close: async () => void (await server.stop(true)) };
});
