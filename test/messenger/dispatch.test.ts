// The messenger's parts wired by hand over a fake link, no transport: ordered dispatch, the BATCH
// hot path, notices, PING/PONG, CANCEL and broken envelopes (docs/protocol.md §4–§5).
import { describe, expect, it } from 'vitest';
import type { LanemuxError } from '../../src/errors.ts';
import { Dispatcher } from '../../src/messenger/dispatch.ts';
import { Kind, decodeErrorBody, idHead, messageHead, requestHead } from '../../src/messenger/envelope.ts';
import { Faults } from '../../src/messenger/faults.ts';
import { Handlers } from '../../src/messenger/handlers.ts';
import { Health } from '../../src/messenger/health.ts';
import { resolveOptions } from '../../src/messenger/options.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import type { PeerState } from '../../src/messenger/peer-state.ts';
import { PeerTable } from '../../src/messenger/peers.ts';
import { PeerLifecycle } from '../../src/messenger/lifecycle.ts';
import type { MessengerErrorEvent } from '../../src/messenger/types.ts';
import { Unary } from '../../src/messenger/unary.ts';
import { PROTOCOL_VERSION, type PeerLink, type TransportAdapter } from '../../src/transport/port.ts';

const SELF = '00000000000000ff';
const utf8 = new TextEncoder();

function wired() {
  const o = resolveOptions({
    transports: [{ dial() {}, listen() {} } as unknown as TransportAdapter],
    healthCheck: false,
  });
  const faults = new Faults(SELF);
  const handlers = new Handlers();
  const rt = systemRuntime();
  const unary = new Unary(o, rt, SELF, handlers, faults);
  const health = new Health(o, rt, faults);
  const lifecycle = new PeerLifecycle(rt, faults, o.downTimeoutMs, o.maxPeers);
  const table = new PeerTable(o, 5_000, new Dispatcher(handlers, unary, health, faults), faults, lifecycle);
  const sent: { lane: number; bytes: Uint8Array }[] = [];
  const closed: LanemuxError[] = [];
  const link: PeerLink = {
    info: {
      id: '00000000000000aa',
      workerId: 0xaan,
      instanceId: 'peer',
      lanes: 4,
      maxMessageSize: 1 << 20,
      transportKeys: [],
      protocolVersion: PROTOCOL_VERSION,
      epoch: 1,
    },
    lanes: 4,
    maxMessageSize: 1 << 20,
    closed: false,
    send(lane, head, body) {
      const bytes = new Uint8Array(head.byteLength + (body?.byteLength ?? 0));
      bytes.set(head);
      if (body !== undefined) bytes.set(body, head.byteLength);
      sent.push({ lane, bytes });
      return true;
    },
    bufferedAmount: () => 0,
    pause: () => true,
    resume() {},
    close(reason) {
      closed.push(reason);
    },
  };
  const st = table.established(link) as PeerState;
  const errors: MessengerErrorEvent[] = [];
  faults.onError((e) => errors.push(e));
  return { faults, handlers, health, st, sent, closed, errors };
}

const message = (name: string, payload: number[]): Uint8Array => {
  const head = messageHead(utf8.encode(name));
  const out = new Uint8Array(head.byteLength + payload.length);
  out.set(head);
  out.set(payload, head.byteLength);
  return out;
};

describe('messenger dispatch over a fake link', () => {
  it("BATCH reaches its lane's handler as a view of the message (no copy), in arrival order", () => {
    const { handlers, st } = wired();
    const got: { lane: number; payload: Uint8Array }[] = [];
    handlers.registerBatchHandler(2, (_from, lane, payload) => got.push({ lane, payload }));
    const first = Uint8Array.of(Kind.Batch, 1, 2, 3);
    const second = Uint8Array.of(Kind.Batch, 4);
    st.message(2, first);
    st.message(2, second);
    expect(got.map((g) => [g.lane, [...g.payload]])).toEqual([
      [2, [1, 2, 3]],
      [2, [4]],
    ]);
    expect(got[0]!.payload.buffer).toBe(first.buffer);
    expect(got[0]!.payload.byteOffset).toBe(1);
    expect(st.activity).toBe(2);
  });

  it('a handler that throws is counted and reported; the next message is still dispatched', () => {
    const { handlers, faults, st, errors, closed } = wired();
    const seen: number[] = [];
    handlers.on('tok', (_from, _lane, payload) => {
      seen.push(payload[0]!);
      if (payload[0] === 1) throw new Error('boom');
    });
    st.message(0, message('tok', [1]));
    st.message(0, message('tok', [2]));
    expect(seen).toEqual([1, 2]);
    expect(faults.stats().handlerErrors).toBe(1);
    expect(errors.map((e) => [e.source, e.handler, e.error.message])).toEqual([['handler', 'tok', 'boom']]);
    expect(closed).toEqual([]);
  });

  it('a message for an unknown handler is noticed once per name, for at most 64 names', () => {
    const { faults, st, sent } = wired();
    for (let i = 0; i < 70; i++) {
      st.message(0, message(`n${i}`, []));
      st.message(0, message(`n${i}`, []));
    }
    st.message(1, Uint8Array.of(Kind.Batch, 9)); // no batch handler on lane 1: a 65th name, over the bound
    const notices = sent.filter((s) => s.bytes[0] === Kind.Notice);
    expect(notices.length).toBe(64);
    expect(notices.every((n) => n.lane === 0)).toBe(true);
    expect(decodeErrorBody(notices[0]!.bytes.subarray(1))).toMatchObject({
      code: 'ERR_UNKNOWN_HANDLER',
      handler: 'n0',
    });
    expect(faults.stats().unknownHandler).toBe(141);
  });

  it('a PING is answered at once on its lane with a PONG of the same id; one of the wrong length closes the link', () => {
    const { faults, st, sent, closed } = wired();
    st.message(3, idHead(Kind.Ping, 0xdeadbeef));
    expect(sent).toEqual([{ lane: 3, bytes: idHead(Kind.Pong, 0xdeadbeef) }]);
    expect(st.activity).toBe(0); // health checks are not activity (the idle bound)
    st.message(0, Uint8Array.of(Kind.Ping, 0, 0, 1));
    expect(closed.map((e) => e.code)).toEqual(['ERR_MALFORMED_ENVELOPE']);
    expect(faults.stats().malformed).toBe(1);
  });

  it('a ping on a lane goes out on that lane and is settled by the PONG that comes back on it', async () => {
    const { health, st, sent } = wired();
    const answered = health.ping(st, 1_000, 2);
    expect(sent.map((m) => [m.lane, m.bytes[0]])).toEqual([[2, Kind.Ping]]);
    const pong = sent[0]!.bytes.slice();
    pong[0] = Kind.Pong;
    st.message(2, pong);
    await expect(answered).resolves.toBeTypeOf('number');
  });

  it('a CANCEL aborts the running handler with ERR_ABORTED, and its late result sends no reply', async () => {
    const { handlers, st, sent } = wired();
    let signal: AbortSignal | undefined;
    let finish!: (v: unknown) => void;
    handlers.handle(
      'slow',
      (_from, _body, s) => {
        signal = s;
        return new Promise((resolve) => (finish = resolve));
      },
      {},
    );
    const head = requestHead(7, utf8.encode('slow'));
    st.message(0, Uint8Array.of(...head, 0xc0)); // body: MessagePack nil
    expect(st.inflight.size).toBe(1);
    st.message(0, idHead(Kind.Cancel, 7));
    expect(signal?.aborted).toBe(true);
    expect((signal?.reason as LanemuxError | undefined)?.code).toBe('ERR_ABORTED');
    finish(42);
    await new Promise((r) => setTimeout(r, 0));
    expect(sent).toEqual([]);
    expect(st.inflight.size).toBe(0);
  });

  it('an unknown kind closes the link with ERR_MALFORMED_ENVELOPE', () => {
    const { st, closed } = wired();
    st.message(0, Uint8Array.of(0x0a));
    expect(closed.map((e) => [e.code, e.message])).toEqual([
      ['ERR_MALFORMED_ENVELOPE', 'malformed envelope on lane 0 from 00000000000000aa: unknown message kind 0x0a'],
    ]);
  });
});
