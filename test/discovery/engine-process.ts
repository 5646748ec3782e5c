// A child process running an engine node: it listens on loopback TCP, registers through discovery,
// prints the handle of an anchor it made (`handle lmx1.…`) and then idles until the test kills it:
// the "engine dies without closing" of the node discovery suite. Run by spawn-engine.ts.
// argv: <etcd|nats> <JSON adapter options>.
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { createNode } from '../../src/stream/node.ts';

const [adapter, json] = process.argv.slice(2);
const options = JSON.parse(json!) as Record<string, unknown>;
const discovery =
  adapter === 'etcd'
    ? (await import('../../src/discovery/etcd.ts')).etcdDiscovery(options)
    : (await import('../../src/discovery/nats.ts')).natsDiscovery(options);
const node = await createNode({ transports: [tcpTransport({ port: 0 })], discovery });
const anchor = node.createAnchor<string>();
process.stdout.write(`handle ${anchor.handle}\n`);
// Stay alive (lanemux's timers do not hold the process) until the test kills us.
setInterval(() => undefined, 1 << 30);
