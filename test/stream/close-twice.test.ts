// A second `node.close()` waits for the first: it must not resolve while the node is still closing
// (the simulator's close phase saw it resolve at once, before the transports had closed).
import { expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode } from '../../src/stream/node.ts';

it('a second close() resolves only once the first has finished, with the same promise', async () => {
  const network = createMemoryNetwork();
  const a = await createNode({ transports: [memoryTransport({ network, name: 'a' })] });
  const b = await createNode({ transports: [memoryTransport({ network, listen: false })] });
  await b.connect('memory://a');
  let firstDone = false;
  const first = b.close().then(() => {
    firstDone = true;
  });
  const second = b.close();
  await second;
  expect(firstDone, 'the first close had finished when the second resolved').toBe(true);
  await first;
  await a.close();
  expect(b.close()).toBe(b.close());
});
