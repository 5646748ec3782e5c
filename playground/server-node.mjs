#!/usr/bin/env node
// The playground's Node server: the decode engine (engine.mjs) behind a WebSocket endpoint.
//
//   npm run build && node playground/server-node.mjs [--port 8787] [--host 127.0.0.1] [--static playground/dist]
//
// One HTTP server on a fixed port carries:
// - `GET /engine.json`: how a page reaches the engine ({ transport: 'websocket', address });
// - the lanemux WebSocket endpoint `ws://HOST:PORT/lanemux` (the ws-server adapter attached to this
//   HTTP server, so a rebuilt engine keeps the same URL);
// - with `--static DIR`, the built playground page itself (what `npm run playground -- --preview` and
//   the screenshot test use).
// It prints one JSON line `{"ready":true,"url":...,"address":...}` once it listens.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { WebSocketServer } from 'ws';
import { webSocketServerTransport } from '../dist/adapters/ws-server.js';
import { createEngine } from './engine.mjs';

const { values: opt } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    host: { type: 'string', default: '127.0.0.1' },
    static: { type: 'string' },
    quiet: { type: 'boolean', default: false },
  },
});
const port = Number(opt.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port: ${opt.port} is not a port`);
const log = opt.quiet ? () => {} : (line) => console.error(`[engine] ${line}`);
const staticDir = opt.static === undefined ? undefined : resolve(opt.static);

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
};

/** @type {Awaited<ReturnType<typeof createEngine>> | null} */
let engine = null;
/** Where a page opens the side-by-side streams (one plain WebSocket each). */
let perStreamUrl = '';

const http = createServer(async (req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname;
  if (path === '/engine.json') {
    // Any origin may ask where the engine is (the vite dev server runs on another port).
    res.writeHead(200, {
      'content-type': 'application/json',
      'access-control-allow-origin': '*',
      'cache-control': 'no-store',
    });
    res.end(
      JSON.stringify({
        transport: 'websocket',
        address: engine?.address ?? '',
        runtime: 'node',
        perStream: perStreamUrl,
      }),
    );
    return;
  }
  if (staticDir !== undefined && req.method === 'GET') {
    const file = normalize(join(staticDir, path === '/' ? 'index.html' : path));
    if (file.startsWith(staticDir)) {
      try {
        const body = await readFile(file);
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
        res.end(body);
        return;
      } catch {
        // fall through to 404
      }
    }
  }
  res.writeHead(404, { 'content-type': 'text/plain' });
  res.end('not found\n');
});
await new Promise((ok, fail) => {
  http.once('error', fail);
  http.listen(port, opt.host, ok);
});
const bound = http.address();
const hostName = opt.host.includes(':') ? `[${opt.host}]` : opt.host;

// Side by side: plain WebSockets, one per stream (no lanemux), on a port of their own.
const psHttp = createServer((_req, res) => res.writeHead(426).end());
await new Promise((ok) => psHttp.listen(0, opt.host, ok));
perStreamUrl = `ws://${hostName}:${psHttp.address().port}/`;
new WebSocketServer({ server: psHttp }).on('connection', (ws) => engine?.attachPerStream(ws));

// Each engine generation attaches a new ws server to the same HTTP server (the old one detaches on close).
engine = await createEngine({
  transports: () => [webSocketServerTransport({ server: http, path: '/lanemux' })],
  log,
});
const url = `http://${hostName}:${bound.port}/`;
console.log(
  JSON.stringify({ ready: true, url: staticDir ? url : null, info: `${url}engine.json`, address: engine.address }),
);
log(`lanemux engine listening on ${engine.address}`);
log(
  staticDir ? `playground page: ${url}` : 'page: served by vite (npm run playground), which forwards /engine.json here',
);

const stop = async () => {
  await engine.close();
  http.close();
  psHttp.close();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
