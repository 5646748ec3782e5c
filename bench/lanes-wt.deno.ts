// Lane scaling over WebTransport, Deno → Deno: the consumer node behind the Deno server adapter, the
// producer on Deno's global WebTransport (the standard-API client adapter), one process each. Same
// shape as lanes.mjs: `streams` streams of `item`-byte items, stream s placed with laneKey s; MB/s =
// payload bytes / (first send → last item read).
//   deno run --unstable-net --node-modules-dir=manual -A bench/lanes-wt.deno.ts recv <lanes> <streams>
//   deno run --unstable-net --node-modules-dir=manual -A bench/lanes-wt.deno.ts send <url> <hashHex> <lanes> <items> <itemBytes>
// Each role prints JSON lines; `recv` first prints {ready, url, hashHex}. lanes-wt.mjs runs the pair.
import process from 'node:process';
import { createNode } from '../src/index.ts';
import { MESSENGER_MUX_KEY } from '../src/messenger/index.ts';
import { createMessenger } from '../src/messenger/index.ts';
import { webTransportServerTransport } from '../src/adapters/deno-webtransport.ts';
import { certificateHashFromHex, createDevCertificate } from '../src/adapters/dev-cert.ts';
import { webTransportClientTransport } from '../src/adapters/webtransport.ts';

declare const Deno: { readonly args: readonly string[]; exit(code?: number): never };

const now = (): number => performance.timeOrigin + performance.now();
const cpuUs = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const [role = '', ...rest] = Deno.args;

if (role === 'recv') {
  const lanes = Number(rest[0] ?? 1);
  const streams = Number(rest[1] ?? 64);
  const cert = await createDevCertificate();
  const messenger = await createMessenger({
    transports: [webTransportServerTransport({ hostname: '127.0.0.1', port: 0, cert: cert.certPem, key: cert.keyPem })],
    transportKeys: [MESSENGER_MUX_KEY],
    lanes,
    healthCheck: false,
  });
  const node = await createNode({ messenger });
  const anchors = Array.from({ length: streams }, () => node.createAnchor<Uint8Array>());
  let bytes = 0;
  let cpu0 = 0;
  const done = Promise.all(
    anchors.map(async (a) => {
      for await (const it of a) bytes += it.byteLength;
    }),
  ).then(() => ({ bytes, t_last: now(), recv_cpu_us: cpuUs() - cpu0 }));
  messenger.handle('bench.handles', () => {
    cpu0 = cpuUs();
    return anchors.map((a) => a.handle);
  });
  messenger.handle('bench.result', () => done);
  console.log(JSON.stringify({ ready: true, url: messenger.addresses[0], hashHex: cert.hashHex }));
  await done;
  // Answer the result request, then leave.
  setTimeout(() => Deno.exit(0), 500);
} else if (role === 'send') {
  const [url = '', hashHex = '', lanesArg = '1', itemsArg = '200', itemArg = '16384'] = rest;
  const lanes = Number(lanesArg);
  const items = Number(itemsArg);
  const messenger = await createMessenger({
    transports: [webTransportClientTransport({ serverCertificateHashes: [certificateHashFromHex(hashHex)] })],
    transportKeys: [MESSENGER_MUX_KEY],
    lanes,
    healthCheck: false,
  });
  const node = await createNode({ messenger });
  const peer = await messenger.connect(url);
  const handles = (await messenger.request(peer.id, 'bench.handles', null)) as string[];
  const senders = await Promise.all(handles.map((h, s) => node.attachAnchor<Uint8Array>(h, { laneKey: BigInt(s) })));
  const item = new Uint8Array(Number(itemArg)).fill(0x61);
  const cpu0 = cpuUs();
  const t0 = now();
  await Promise.all(
    senders.map(async (s) => {
      for (let i = 0; i < items; i++) await s.send(item);
      await s.finalize();
    }),
  );
  const sendCpu = cpuUs() - cpu0;
  const r = (await messenger.request(peer.id, 'bench.result', null, { timeoutMs: 60_000 })) as {
    bytes: number;
    t_last: number;
    recv_cpu_us: number;
  };
  const wall = r.t_last - t0;
  console.log(
    JSON.stringify({
      bench: `lanes-wt-${lanes}`,
      lanes,
      streams: handles.length,
      items,
      item_bytes: item.byteLength,
      bytes: r.bytes,
      wall_ms: Math.round(wall * 10) / 10,
      mb_per_s: Math.round((r.bytes / 1e6 / (wall / 1000)) * 10) / 10,
      cpu_us_per_item: Math.round(((sendCpu + r.recv_cpu_us) / (handles.length * items)) * 100) / 100,
    }),
  );
  await node.close();
  await messenger.close();
  Deno.exit(0);
} else {
  console.error('usage: lanes-wt.deno.ts recv <lanes> <streams> | send <url> <hashHex> <lanes> <items> <itemBytes>');
  Deno.exit(2);
}
