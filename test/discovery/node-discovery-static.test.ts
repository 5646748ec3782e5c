// createNode({ discovery }) over the in-memory static store.
import { staticHarness } from './harnesses.ts';
import { describeNodeDiscovery } from './node-discovery.ts';

describeNodeDiscovery('static', staticHarness);
