// A peer with live slots that stops answering the mux's health check is closed with
// ERR_HEALTH_CHECK_FAILED, the code docs/protocol.md §3.4 gives (it used to be a plain ERR_CLOSED
// "health check failed", so the peer reported an ordinary close). Live slots either way: a consumer
// checks the producer that streams to it, not only a producer its consumer.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createNode } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/index.ts';
import { closeAll, open } from './helpers.ts';

const messengers: Messenger[] = [];
afterEach(async () => {
  await closeAll();
  for (const m of messengers.splice(0)) await m.close();
});

async function messenger(listen: boolean): Promise<Messenger> {
  const m = await createMessenger({
    transports: [tcpTransport({ listen, closeGraceMs: 100 })],
    transportKeys: [MESSENGER_MUX_KEY],
    healthCheck: false,
  });
  messengers.push(m);
  return m;
}

describe('mux health check', () => {
  it('a consumer whose producer stops answering closes the link with ERR_HEALTH_CHECK_FAILED within the health-check bound, not after the stream watchdog windows', async () => {
    const cm = await messenger(true);
    const pm = await messenger(false);
    const consumer = await createNode({ messenger: cm, mux: { healthCheckInterval: 50, healthCheckTimeout: 100 } });
    const producer = await createNode({ messenger: pm });
    open.push(consumer, producer);
    const peer = await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('live');
    const gone = new Promise<string>((r) => cm.onPeerGone((e) => r(e.code)));
    // The producer stops reading from the consumer: the consumer's PINGs go unanswered.
    expect(pm.pause(peer)).toBe(true);
    const t0 = performance.now();
    expect(await gone).toBe('ERR_HEALTH_CHECK_FAILED');
    // interval + timeout = 150 ms, with slack for a loaded machine. The consumer only receives on this
    // link; before it health-checked such a peer, the stream watchdog (a heartbeat window, 5 s here)
    // was the first to notice.
    expect(performance.now() - t0).toBeLessThan(2_500);
    pm.resume(peer);
  });
});
