/**
 * Serving the Prometheus text from an HTTP server: a fetch-style handler (`Request` → `Response`,
 * for `Deno.serve`, `Bun.serve`, Hono, Cloudflare Workers and any WHATWG server) and a listener for
 * Node's `http.createServer` (typed structurally, so this module imports nothing from Node).
 */
import { collect, type MetricsSource, PROMETHEUS_CONTENT_TYPE, toFamilies, toPrometheusText } from './exposition.ts';

/** The Prometheus text of one or more nodes (a series present in several: the last source's value). */
export function prometheusText(sources: MetricsSource | readonly MetricsSource[]): string {
  return toPrometheusText(toFamilies(collect(sources)));
}

/** Options of the metrics handlers. */
export interface PrometheusHandlerOptions {
  /** The path served; any other path answers 404. Defaults to `/metrics`. */
  readonly path?: string;
}

/**
 * A fetch-style handler answering `GET <path>` with the Prometheus text:
 * `Deno.serve(prometheusHandler(node))`, `Bun.serve({ fetch: prometheusHandler(node) })`.
 * Other methods answer 405, other paths 404.
 */
export function prometheusHandler(
  sources: MetricsSource | readonly MetricsSource[],
  options: PrometheusHandlerOptions = {},
): (request: Request) => Response {
  const path = options.path ?? '/metrics';
  return (request) => {
    if (new URL(request.url).pathname !== path) return new Response('not found\n', { status: 404 });
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return new Response('method not allowed\n', { status: 405, headers: { allow: 'GET, HEAD' } });
    const body = request.method === 'HEAD' ? null : prometheusText(sources);
    return new Response(body, { status: 200, headers: { 'content-type': PROMETHEUS_CONTENT_TYPE } });
  };
}

/** The parts of Node's `IncomingMessage` the listener reads. */
export interface NodeRequestLike {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
}
/** The parts of Node's `ServerResponse` the listener writes. */
export interface NodeResponseLike {
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body?: string): unknown;
}

/** A listener for Node's `http.createServer(nodePrometheusListener(node))`, answering as {@link prometheusHandler}. */
export function nodePrometheusListener(
  sources: MetricsSource | readonly MetricsSource[],
  options: PrometheusHandlerOptions = {},
): (req: NodeRequestLike, res: NodeResponseLike) => void {
  const path = options.path ?? '/metrics';
  return (req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (pathname !== path) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found\n');
    } else if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'text/plain', allow: 'GET, HEAD' });
      res.end('method not allowed\n');
    } else {
      res.writeHead(200, { 'content-type': PROMETHEUS_CONTENT_TYPE });
      res.end(req.method === 'HEAD' ? undefined : prometheusText(sources));
    }
  };
}
