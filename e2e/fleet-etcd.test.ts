// The fleet over a real etcd (Debian etcd-server): see e2e/fleet/describe-fleet.ts.
import { etcdHarness } from '../test/discovery/harnesses.ts';
import { describeFleet } from './fleet/describe-fleet.ts';

describeFleet('etcd', etcdHarness);
