// The fleet over a real nats-server with JetStream KV (Debian nats-server): see e2e/fleet/describe-fleet.ts.
import { natsHarness } from '../test/discovery/harnesses.ts';
import { describeFleet } from './fleet/describe-fleet.ts';

describeFleet('nats', natsHarness);
