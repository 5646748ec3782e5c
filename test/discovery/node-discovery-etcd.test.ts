// createNode({ discovery }) over a real etcd (Debian's etcd-server, started by the test).
import { etcdHarness } from './harnesses.ts';
import { describeNodeDiscovery } from './node-discovery.ts';
import { spawnEngine } from './spawn-engine.ts';

describeNodeDiscovery('etcd', etcdHarness, {
  outage: true,
  spawnEngine: (space) => spawnEngine('etcd', space.childOptions!),
});
