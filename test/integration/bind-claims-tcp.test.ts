// Authorization of bind claims over real loopback TCP: an OpenSlot claims an attach bind only from
// the peer the attach was answered to, and a pre-bind only with its exact (random) session. An
// attacker peer guessing sessions — counter-like values, random ones, even the exact session of an
// attach answered to someone else — is refused (CloseSlot{UnknownSlot}), counted in
// claim_refused_total, and the honest stream, whose OpenSlot arrives after all of that, is untouched.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { BatchEncoder, CloseReason, MESSENGER_MUX_KEY, RecordType, decodeBatch } from '../../src/wire/index.ts';
import { closeAll, suiteTransports } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';
import { tappedNode } from './wire-tap.ts';
import type { Tap } from './wire-tap.ts';

afterEach(closeAll);

interface Attacker {
  readonly messenger: Messenger;
  /** CloseSlot records the consumer sent back, as [slot, reason]. */
  closes(): Array<[number, number]>;
  /** One OpenSlot per guess (each on its own slot), each followed by a Data record of its own. */
  claim(localId: bigint, sessions: readonly bigint[]): Promise<number[]>;
}

async function attacker(address: string): Promise<Attacker> {
  const messenger = await createMessenger({
    transports: [suiteTransports.tcp({ listen: false })],
    transportKeys: [MESSENGER_MUX_KEY],
    healthCheck: false,
    receiveWindow: 1 << 20,
  });
  const replies: Uint8Array[] = [];
  messenger.registerBatchHandler(0, (_from, _lane, payload) => replies.push(payload.slice()));
  const peer = (await messenger.connect(address)).id;
  let batchSeq = 0;
  let nextIndex = 1;
  return {
    messenger,
    closes: () =>
      replies
        .flatMap((p) => decodeBatch(p).records)
        .filter((r) => r.type === RecordType.CloseSlot)
        .map((r): [number, number] => [r.slot, r.closeReason!]),
    async claim(localId, sessions) {
      const slots: number[] = [];
      for (let i = 0; i < sessions.length; i += 32) {
        const enc = new BatchEncoder();
        enc.begin(1n, batchSeq++, 0);
        for (const s of sessions.slice(i, i + 32)) {
          const slot = (nextIndex++ << 8) | 1;
          slots.push(slot);
          enc.appendOpenSlot(slot, 0, localId, s);
          enc.appendItemString(slot, 1, 'attacker token');
        }
        await messenger.sendBatch(peer, 0, enc.finish().slice());
      }
      return slots;
    },
  };
}

/** Counter-like guesses (what the session ids used to be) and random ones. */
function guesses(): bigint[] {
  const random = Array.from({ length: 64 }, () => {
    const b = new BigUint64Array(1);
    crypto.getRandomValues(b);
    return b[0]!;
  });
  return [...Array.from({ length: 64 }, (_, k) => BigInt(k + 1)), ...random];
}

async function honestStream(sender: StreamSender<string>, anchor: StreamAnchor<string>, ptap: Tap): Promise<void> {
  ptap.release(); // the honest OpenSlot (and its records) reach the consumer only now
  const reading = readAll(anchor);
  for (let k = 0; k < 100; k++) await sender.send(`honest-${k}`);
  await sender.finalize();
  expect(await reading).toEqual(Array.from({ length: 100 }, (_, k) => `honest-${k}`));
  expect(await sender.retired()).toBe('Sent');
}

describe('bind claims over TCP', () => {
  let consumer: LanemuxNode;

  it('an attacker peer cannot claim an attach bind answered to another peer, even with its exact session; the honest stream is exact and complete', async () => {
    consumer = (await tappedNode()).node;
    const { node: producer, tap: ptap } = await tappedNode({ listen: false });
    await producer.connect(consumer.address);
    const evil = await attacker(consumer.address);
    try {
      const victim = consumer.createAnchor<string>();
      ptap.holdBatches = true;
      const sender = await producer.attachAnchor<string>(victim.handle); // answered to the producer; its OpenSlot is held back
      const tries = [...guesses(), victim.bind!.sessionId]; // the last one as if the session had leaked
      const slots = await evil.claim(parseHandle(victim.handle).localId, tries);
      await waitFor(() => evil.closes().length === tries.length, 5_000, 'a refusal per claim');
      expect(evil.closes()).toEqual(slots.map((s) => [s, CloseReason.UnknownSlot]));
      expect(consumer.metricsRegistry.claimRefused).toBe(tries.length);
      expect(victim.bind!.claimed).toBe(false);
      await honestStream(sender, victim, ptap);
      expect(consumer.metricsRegistry.claimRefused).toBe(tries.length);
    } finally {
      await evil.messenger.close();
    }
  }, 30_000);

  it("an attacker peer guessing a pre-bind's session (counter-like and random values) is refused; the ticket holder still opens it and streams exact and complete", async () => {
    consumer = (await tappedNode()).node;
    const { node: producer, tap: ptap } = await tappedNode({ listen: false });
    await producer.connect(consumer.address);
    const evil = await attacker(consumer.address);
    try {
      const victim = consumer.createAnchor<string>();
      const ticket = consumer.prebindAnchor(victim)!;
      const tries = guesses(); // a random guess hitting a random u64 session: 2^-57 for these 128
      const slots = await evil.claim(parseHandle(victim.handle).localId, tries);
      await waitFor(() => evil.closes().length === tries.length, 5_000, 'a refusal per claim');
      expect(evil.closes()).toEqual(slots.map((s) => [s, CloseReason.UnknownSlot]));
      expect(consumer.metricsRegistry.claimRefused).toBe(tries.length);
      ptap.holdBatches = true;
      const sender = await producer.openAnchorStream<string>(victim.handle, ticket);
      await honestStream(sender, victim, ptap);
    } finally {
      await evil.messenger.close();
    }
  }, 30_000);

  it('session ids are random u64s, not a counter', async () => {
    consumer = (await tappedNode()).node;
    const sessions = Array.from({ length: 16 }, () => consumer.createAnchor()).map((a) => {
      expect(consumer.prebindAnchor(a)).toBeDefined();
      return a.bind!.sessionId;
    });
    expect(new Set(sessions).size).toBe(16);
    // A counter would give 1..16; 16 random u64s all below 2^32 has probability 2^-512.
    expect(sessions.some((s) => s >= 1n << 32n)).toBe(true);
  });
});
