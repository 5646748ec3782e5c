// The discovery conformance suite against a real etcd (Debian's etcd-server, started by the test).
import { describeDiscovery } from './conformance.ts';
import { etcdHarness } from './harnesses.ts';
import { spawnRegistrant } from './spawn-registrant.ts';

describeDiscovery('etcd', etcdHarness, {
  restart: true,
  loseLease: true,
  reportsLeaseLoss: true,
  spawnRegistrant: (space, hex) => spawnRegistrant('etcd', space.childOptions!, hex),
});
