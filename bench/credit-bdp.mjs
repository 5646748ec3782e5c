#!/usr/bin/env node
// One long stream of 1 KiB records over loopback TCP through a proxy that delays each direction by
// --delay/2 ms (so the round trip gains --delay ms): static credit C (the default 32), a hand-tuned
// large C, and the auto-tuned window (mux.autoCredit). Prints records/s per mode, and auto / tuned.
// Usage: node bench/credit-bdp.mjs [--records 20000] [--delay 50] [--tuned 1024] [--modes static,tuned,auto] [--dist dist]
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = {};
for (let i = 2; i < process.argv.length; i++)
  if (process.argv[i].startsWith('--')) args[process.argv[i].slice(2)] = process.argv[i + 1];
const records = Number(args.records ?? 20_000);
const delay = Number(args.delay ?? 50);
const tuned = Number(args.tuned ?? 1024);
const distDir = path.resolve(args.dist ?? 'dist');
const { createNode } = await import(pathToFileURL(path.join(distDir, 'index.js')).href);
const { tcpTransport } = await import(pathToFileURL(path.join(distDir, 'adapters/node-tcp.js')).href);

/** A proxy that forwards each chunk after delay/2 ms, in order, both ways. */
function delayProxy(targetPort) {
  const half = delay / 2;
  const pipe = (from, to) => {
    from.on('data', (d) => setTimeout(() => to.destroyed || to.write(d), half));
    from.on('close', () => setTimeout(() => to.destroy(), half));
    from.on('error', () => {});
  };
  const srv = net.createServer((client) => {
    client.setNoDelay(true);
    const up = net.connect(targetPort, '127.0.0.1');
    up.setNoDelay(true);
    pipe(client, up);
    pipe(up, client);
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

async function run(mode) {
  const mux =
    mode === 'static'
      ? { autoCredit: false }
      : mode === 'tuned'
        ? { autoCredit: false, initialCredit: tuned }
        : { autoCredit: true };
  const recv = await createNode({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })], mux });
  const send = await createNode({ transports: [tcpTransport({ listen: false })], mux });
  const port = Number(recv.address.split(':').pop());
  const proxy = await delayProxy(port);
  const via = recv.address.replace(/:\d+$/, `:${proxy.address().port}`);
  const anchor = recv.createAnchor();
  await send.connect(via);
  const s = await send.attachAnchor(anchor.handle);
  const record = new Uint8Array(1024);
  const t0 = performance.now();
  const producing = (async () => {
    for (let i = 0; i < records; i++) await s.send(record);
    await s.end?.();
  })();
  let n = 0;
  for await (const _ of anchor) if (++n === records) break;
  const ms = performance.now() - t0;
  await producing.catch(() => {});
  await Promise.allSettled([send.close?.(), recv.close?.()]);
  proxy.close();
  return { mode, records_per_s: Math.round((records / ms) * 1000), ms: Math.round(ms) };
}

const out = [];
for (const mode of (args.modes ?? 'static,tuned,auto').split(',')) out.push(await run(mode));
const by = Object.fromEntries(out.map((r) => [r.mode, r.records_per_s]));
console.log(
  JSON.stringify({
    bench: 'credit-bdp',
    records,
    delay_ms: delay,
    tuned_c: tuned,
    results: out,
    auto_over_tuned: Math.round((by.auto / by.tuned) * 100) / 100,
  }),
);
process.exit(0);
