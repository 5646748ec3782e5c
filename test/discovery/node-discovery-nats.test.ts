// createNode({ discovery }) over a real nats-server with JetStream (Debian's, started by the test).
import { natsHarness } from './harnesses.ts';
import { describeNodeDiscovery } from './node-discovery.ts';
import { spawnEngine } from './spawn-engine.ts';

describeNodeDiscovery('nats', natsHarness, {
  outage: true,
  spawnEngine: (space) => spawnEngine('nats', space.childOptions!),
});
