#!/usr/bin/env node
// `npm run playground`: the Node engine (server-node.mjs, WebSocket) and the page.
//
//   npm run playground                 engine on :8787 + vite's dev server (edit the page live)
//   npm run playground -- --preview    build the page once; the engine serves it on its own port
//   npm run playground -- --port 9000  another engine port
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build, createServer } from 'vite';

const { values: opt } = parseArgs({
  options: { preview: { type: 'boolean', default: false }, port: { type: 'string', default: '8787' } },
});
const here = fileURLToPath(new URL('.', import.meta.url));
const configFile = fileURLToPath(new URL('./vite.config.ts', import.meta.url));
process.env['PLAYGROUND_ENGINE_PORT'] = opt.port;

if (opt.preview) await build({ configFile, logLevel: 'warn' });

const args = [fileURLToPath(new URL('./server-node.mjs', import.meta.url)), '--port', opt.port];
if (opt.preview) args.push('--static', `${here}dist`);
const engine = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
const ready = await new Promise((resolve, reject) => {
  engine.once('exit', (code) => reject(new Error(`the engine exited (${code}); is port ${opt.port} free? (--port N)`)));
  createInterface({ input: engine.stdout }).once('line', (line) => resolve(JSON.parse(line)));
});

let pageUrl = ready.url;
let vite;
if (!opt.preview) {
  vite = await createServer({ configFile });
  await vite.listen();
  pageUrl = vite.resolvedUrls?.local[0];
}
console.log(
  `\n  lanemux playground\n  engine (Node, WebSocket): ${ready.address}\n  open:                     ${pageUrl}\n`,
);

const stop = async () => {
  engine.kill('SIGTERM');
  await vite?.close();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
