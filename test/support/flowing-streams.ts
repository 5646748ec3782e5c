// Many streams flowing from a producer node to a consumer node, for the resume suites that cut the
// link under them: each sends numbered items until told to stop, and must then have delivered
// exactly what it sent, in order.
import { expect } from 'vitest';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { collect } from './collect.ts';

export interface FlowingStreamsOptions {
  /** How many streams. Defaults to 64. */
  readonly count?: number;
  /** Pause 1 ms after every this many items (a slower, timer-paced producer). Defaults to none. */
  readonly pauseEvery?: number;
}

/** Send `"0"`, `"1"`, … until `stop()` says so, then finalize: how many were sent, or the error. */
async function produce(
  sender: StreamSender<string>,
  stop: () => boolean,
  pauseEvery: number | undefined,
): Promise<number | unknown> {
  let i = 0;
  try {
    while (!stop()) {
      await sender.send(`${i++}`);
      if (pauseEvery !== undefined && i % pauseEvery === 0) await new Promise((r) => setTimeout(r, 1));
    }
    await sender.finalize();
    return i;
  } catch (e) {
    return e;
  }
}

/**
 * Open `count` streams (anchors on `consumer`, senders on `producer`) and start them flowing.
 * `finish()` stops every producer and expects each stream to end with no error and exactly the
 * items its producer sent, in order.
 */
export async function flowingStreams(
  consumer: LanemuxNode,
  producer: LanemuxNode,
  options: FlowingStreamsOptions = {},
): Promise<{ finish(): Promise<void> }> {
  const anchors = Array.from({ length: options.count ?? 64 }, () => consumer.createAnchor<string>());
  const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
  const reads = anchors.map((a) => collect(a));
  let done = false;
  const writes = senders.map((s) => produce(s, () => done, options.pauseEvery));
  return {
    async finish() {
      done = true;
      const sent = await Promise.all(writes);
      const results = await Promise.all(reads);
      for (let i = 0; i < results.length; i++) {
        expect(typeof sent[i], String(sent[i])).toBe('number');
        expect(results[i]!.error).toBeNull();
        expect(results[i]!.items).toEqual(Array.from({ length: sent[i] as number }, (_, k) => `${k}`));
      }
    },
  };
}
