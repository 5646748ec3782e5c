/**
 * Validation runs on zod/mini, which loads no locale: without the English messages that
 * `src/validate.ts` passes per parse, every reason below would read "Invalid input". The messages
 * are the ones full zod gave, and lanemux leaves zod's global configuration to the application.
 */
import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { z } from 'zod/mini';
import { ConfigError, parseTicket } from '../src/index.ts';
import { resolveMuxConfig } from '../src/mux/config.ts';
import { attachRequestSchema } from '../src/stream/attach-messages.ts';
import { memoryTransport } from '../src/adapters/memory.ts';
import { webSocketClientTransport } from '../src/adapters/websocket.ts';

const b64url = (bytes: Uint8Array): string =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

function thrown(f: () => unknown): { code?: string; message: string } {
  try {
    f();
  } catch (e) {
    return e as { code?: string; message: string };
  }
  throw new Error('did not throw');
}

describe('validation messages (zod/mini with English messages)', () => {
  it('a mux config error names the field and says why', () => {
    const e = thrown(() => resolveMuxConfig({ initialCredit: -1 }));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.message).toBe('invalid config mux.initialCredit: Too small: expected number to be >=0');
    expect(thrown(() => resolveMuxConfig({ bogus: 1 })).message).toBe(
      'invalid config mux.bogus: Unrecognized key: "bogus"',
    );
    expect(thrown(() => resolveMuxConfig({ detectionMultiplier: 1.5 })).message).toBe(
      'invalid config mux.detectionMultiplier: Invalid input: expected int, received number',
    );
  });

  it('a bad ticket field is named with the reason', () => {
    const good = {
      streaming_transport_key: 'mux',
      heartbeat_interval_ms: 5000,
      routing_session_id: '0x1f',
      initial_credit: 64,
      slot_byte_budget: 1024,
    };
    expect(parseTicket(b64url(encode(good))).routing_session_id).toBe(31n);
    const e = thrown(() => parseTicket(b64url(encode({ ...good, lane: 16 }))));
    expect(e.code).toBe('ERR_INVALID_TICKET');
    expect(e.message).toBe('ticket field lane: Too big: expected number to be <=15');
  });

  it('option errors list every bad field with its reason', () => {
    const e = thrown(() => webSocketClientTransport({ minReconnectionDelay: -1, connectionTimeout: 0 }));
    expect(e.code).toBe('ERR_INVALID_CONFIG');
    expect(e.message).toContain('✖ Too small: expected number to be >=0\n  → at minReconnectionDelay');
    expect(e.message).toContain('✖ Too small: expected number to be >=1\n  → at connectionTimeout');
    expect(thrown(() => memoryTransport({ name: 'a b' })).message).toContain('✖ no slashes or spaces\n  → at name');
  });

  it('schemas parsed by other modules carry the messages too', () => {
    const r = attachRequestSchema.safeParse({
      handle: { hi: '0x1', lo: '0x2' },
      supported_transport_keys: Array(17).fill('mux'),
    });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toBe('Too big: expected array to have <=16 items');
  });

  it("zod's global configuration stays the application's", () => {
    expect(z.config().localeError).toBeUndefined();
  });
});
