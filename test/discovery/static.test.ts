// The discovery conformance suite against the in-memory static store.
import { describeDiscovery } from './conformance.ts';
import { staticHarness } from './harnesses.ts';

describeDiscovery('static', staticHarness);
