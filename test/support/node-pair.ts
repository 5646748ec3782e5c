/**
 * A consumer node and a producer node joined by an in-process loop messenger; both are pushed onto
 * `nodes` so the test's afterEach can close them.
 */
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { LoopMessenger } from './loop-messenger.ts';

export async function nodePair(nodes: LanemuxNode[], mux: NodeOptions['mux'] = {}) {
  const [link, remote] = LoopMessenger.pair();
  const consumer = await createNode({ messenger: link, mux });
  const producer = await createNode({ messenger: remote, mux });
  nodes.push(consumer, producer);
  return { consumer, producer, link, remote };
}
