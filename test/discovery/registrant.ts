// A child process that registers one worker and then idles until killed: the "registering client
// dies" of the conformance suite. Run by spawn-registrant.ts with the repo's TypeScript hooks.
// argv: <etcd|nats> <JSON { options, registration }>.
const [adapter, json] = process.argv.slice(2);
const { options, registration } = JSON.parse(json!) as { options: Record<string, unknown>; registration: never };
const discovery =
  adapter === 'etcd'
    ? (await import('../../src/discovery/etcd.ts')).etcdDiscovery(options)
    : (await import('../../src/discovery/nats.ts')).natsDiscovery(options);
await discovery.register(registration);
process.stdout.write('registered\n');
// Stay alive (the keep-alive timers do not hold the process) until the test kills us.
setInterval(() => undefined, 1 << 30);
