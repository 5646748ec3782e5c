// Review regressions for the hand-written ticket writer: `encodeTicket` is public and writes into
// a fixed 256-byte scratch; a transport key it accepts (up to 255 characters) must not overflow it.
import { Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { encodeTicket } from '../../src/stream/control.ts';
import type { StreamOpenTicket } from '../../src/stream/control.ts';

/** What the encoder path writes for `t` (the pre-fast-path `encodeTicket`). */
function reference(t: StreamOpenTicket): string {
  const body: Record<string, unknown> = {
    streaming_transport_key: t.streaming_transport_key,
    heartbeat_interval_ms: t.heartbeat_interval_ms,
    routing_session_id: `0x${BigInt.asUintN(64, t.routing_session_id).toString(16)}`,
    initial_credit: t.initial_credit,
    slot_byte_budget: t.slot_byte_budget,
  };
  if (t.lane !== 0) body['lane'] = t.lane;
  return Buffer.from(new Encoder().encode(body)).toString('base64url');
}

describe('review: encodeTicket fast writer', () => {
  it('writes the same ticket as the encoder for every transport key length up to 255 (no scratch overflow)', () => {
    const mismatches: string[] = [];
    for (let len = 0; len <= 255; len++) {
      const t: StreamOpenTicket = {
        streaming_transport_key: 'k'.repeat(len),
        heartbeat_interval_ms: 86_400_000,
        routing_session_id: 0xffff_ffff_ffff_ffffn,
        initial_credit: 0xffff_ffff,
        slot_byte_budget: 2 ** 40,
        lane: 15,
      };
      let got: string;
      try {
        got = encodeTicket(t);
      } catch (e) {
        mismatches.push(`${len}: threw ${(e as Error).name}: ${(e as Error).message}`);
        continue;
      }
      if (got !== reference(t)) mismatches.push(`${len}: differs (${got.length} vs ${reference(t).length} chars)`);
    }
    expect(mismatches).toEqual([]);
  });
});
