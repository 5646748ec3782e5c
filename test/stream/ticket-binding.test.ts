// A zero-RTT ticket names the anchor it was issued for (`anchor_id`, docs/protocol.md §8): a producer
// refuses it with another anchor's handle before it sends anything. And the control plane's one
// rule for MessagePack maps: a field this version does not know is ignored (tickets, attach
// requests and answers alike), while the known fields keep their types and bounds.
import { decode as msgpackDecode, encode as msgpackEncode } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import { attachResponseSchema, mpscAttachResponseSchema, u128 } from '../../src/stream/attach-messages.ts';
import { parseTicket } from '../../src/stream/ticket.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { nodePair } from '../support/node-pair.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

const b64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');
const body = (ticket: string): Record<string, unknown> =>
  msgpackDecode(Buffer.from(ticket, 'base64url')) as Record<string, unknown>;
const encode = (o: Record<string, unknown>): string => b64url(msgpackEncode(o));

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

describe('a ticket is bound to its anchor', () => {
  it('a ticket carries the local id of the anchor it was issued for', async () => {
    const { consumer } = await nodePair(nodes);
    const anchor = consumer.createAnchor();
    const t = parseTicket(consumer.prebindAnchor(anchor)!);
    expect(t.anchor_id).toBe(parseHandle(anchor.handle).localId);
  });

  it("openAnchorStream with another anchor's handle rejects ERR_INVALID_TICKET and sends nothing; both pre-binds stay usable", async () => {
    const { consumer, producer, remote } = await nodePair(nodes);
    const a = consumer.createAnchor<string>();
    const b = consumer.createAnchor<string>();
    const ta = consumer.prebindAnchor(a)!;
    const tb = consumer.prebindAnchor(b)!;
    await settle();
    const sentBefore = remote.sent.length;
    const err = await producer.openAnchorStream<string>(b.handle, ta).then(
      () => null,
      (e: unknown) => e as { code?: string; message?: string },
    );
    expect(err).toMatchObject({ code: 'ERR_INVALID_TICKET' });
    expect(err!.message).toMatch(/issued for anchor 0x[0-9a-f]+, not for 0x[0-9a-f]+/);
    // The same with the ticket in an attach.
    await expect(producer.attachAnchor(b.handle, { ticket: ta })).rejects.toMatchObject({ code: 'ERR_INVALID_TICKET' });
    await settle();
    expect(remote.sent.length, 'no batch left the producer').toBe(sentBefore);
    expect(producer.metricsRegistry.liveSlots).toBe(0);
    // Each ticket still opens its own anchor.
    const sa = await producer.openAnchorStream<string>(a.handle, ta);
    const sb = await producer.openAnchorStream<string>(b.handle, tb);
    const ra = readAll(a);
    const rb = readAll(b);
    await sa.send('for a');
    await sb.send('for b');
    await sa.finalize();
    await sb.finalize();
    expect(await ra).toEqual(['for a']);
    expect(await rb).toEqual(['for b']);
  });

  it('a ticket whose anchor_id is not a 0x-hex u64 is refused naming the field', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor();
    const good = body(consumer.prebindAnchor(anchor)!);
    for (const bad of [7, '0X1', 'lmx1.00', null]) {
      await expect(producer.openAnchorStream(anchor.handle, encode({ ...good, anchor_id: bad }))).rejects.toMatchObject(
        {
          code: 'ERR_INVALID_TICKET',
          message: expect.stringContaining('anchor_id'),
        },
      );
    }
  });
});

describe('unknown fields are ignored; known fields keep their checks', () => {
  it('a ticket with fields this version does not know decodes to the same ticket and opens its stream', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    const extended = encode({ ...body(ticket), future_field: { nested: [1, 'two', null] }, another: 'x' });
    expect(parseTicket(extended)).toStrictEqual(parseTicket(ticket));
    const s = await producer.openAnchorStream<string>(anchor.handle, extended);
    const read = readAll(anchor);
    await s.send('ok');
    await s.finalize();
    expect(await read).toEqual(['ok']);
  });

  it('a ticket with an unknown field and a known field of the wrong type is still refused, naming the known field', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor();
    const good = body(consumer.prebindAnchor(anchor)!);
    for (const [field, value] of [
      ['initial_credit', '64'],
      ['routing_session_id', 12],
      ['lane', 16],
      ['heartbeat_interval_ms', -1],
    ] as const) {
      await expect(
        producer.openAnchorStream(anchor.handle, encode({ ...good, future_field: 1, [field]: value })),
      ).rejects.toMatchObject({
        code: 'ERR_INVALID_TICKET',
        message: expect.stringContaining(field),
      });
    }
    expect(producer.metricsRegistry.liveSlots).toBe(0);
  });

  it('a ticket stays bounded in size: unknown fields past the limit are refused ERR_INVALID_TICKET', () => {
    const t = encode({
      streaming_transport_key: 'messenger-mux-v2',
      heartbeat_interval_ms: 5000,
      routing_session_id: '0x1',
      initial_credit: 4,
      slot_byte_budget: 0,
      pad: 'x'.repeat(2000),
    });
    expect(() => parseTicket(t)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_TICKET' }));
  });

  it('an attach request with fields this version does not know is answered Ok; a known field of the wrong type is refused', async () => {
    const { consumer, remote } = await nodePair(nodes);
    const anchor = consumer.createAnchor<string>();
    const h = parseHandle(anchor.handle);
    const answer = (await remote.request(consumer.workerId.toString(16).padStart(16, '0'), '_anchor_attach', {
      handle: { ...u128(h.workerId, h.localId), extra: true },
      supported_transport_keys: ['messenger-mux-v2'],
      future_field: { x: [1, 2] },
    })) as { Ok?: Record<string, unknown> };
    expect(answer.Ok).toMatchObject({ streaming_transport_key: 'messenger-mux-v2' });
    const other = consumer.createAnchor();
    const o = parseHandle(other.handle);
    const refused = await remote.request(consumer.workerId.toString(16).padStart(16, '0'), '_anchor_attach', {
      handle: u128(o.workerId, o.localId),
      supported_transport_keys: ['messenger-mux-v2'],
      lane_key: 5,
      future_field: 1,
    });
    expect(refused).toMatchObject({ Err: { reason: expect.stringContaining('malformed attach request') } });
  });

  it('attach answers with fields this version does not know parse; a known field of the wrong type does not', () => {
    const ok = {
      streaming_transport_key: 'messenger-mux-v2',
      heartbeat_interval_ms: 5000,
      routing_session_id: '0x2a',
      initial_credit: 8,
      slot_byte_budget: 0,
      future_field: [1],
    };
    const r = attachResponseSchema.safeParse({ Ok: ok });
    expect(r.success && 'Ok' in r.data && r.data.Ok.routing_session_id).toBe(42n);
    expect(attachResponseSchema.safeParse({ Err: { reason: 'no', future_field: 1 } }).success).toBe(true);
    expect(mpscAttachResponseSchema.safeParse({ Ok: { ...ok, sender_id: '0x1' } }).success).toBe(true);
    expect(attachResponseSchema.safeParse({ Ok: { ...ok, initial_credit: '8' } }).success).toBe(false);
  });
});
