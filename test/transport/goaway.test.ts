// GOAWAY on an established link (docs/protocol.md §3.2): the last message of its lane; with one lane it closes the link,
// with several it closes after GOAWAY_CLOSE_GRACE_MS; one that does not decode is malformed.
import { afterEach, describe, expect, it } from 'vitest';
import type { Messenger, PeerGoneEvent } from '../../src/messenger/types.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { decodeGoaway, encodeGoaway } from '../../src/transport/hello.ts';
import { GOAWAY_CLOSE_GRACE_MS } from '../../src/transport/link.ts';
import { nextGone, within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { messengerFixture, rawPeer } from './raw-peer.ts';

const { sockets, tcpMessenger: tcpNode } = messengerFixture(afterEach);

describe('GOAWAY on an established link', () => {
  const MESSAGE_TOK = (text: string): Uint8Array => Uint8Array.from([0x02, 3, 0x74, 0x6f, 0x6b, ...Buffer.from(text)]);

  async function server(lanes = 1): Promise<{ a: Messenger; got: string[]; gone: Promise<PeerGoneEvent> }> {
    const a = await tcpNode({ lanes });
    const got: string[] = [];
    a.on('tok', (_from, lane, payload) => got.push(`${lane}:${Buffer.from(payload).toString()}`));
    return { a, got, gone: nextGone(a) };
  }

  it('is the last message of its lane and closes the link even if the peer keeps the socket open', async () => {
    const { a, got, gone } = await server();
    const raw = await rawPeer(a.addresses[0]!, sockets);
    await waitFor(() => a.peers().length === 1, 5_000, 'the raw peer established');
    raw.send(MESSAGE_TOK('before'));
    raw.send(encodeGoaway(new TransportError('ERR_CLOSED', 'bye')));
    raw.send(MESSAGE_TOK('after'));
    const e = await within(gone, 5_000, 'the link closing');
    expect(e.code).toBe('ERR_PEER_GONE');
    expect(e.reason).toContain('bye');
    await within(raw.closed, 5_000, 'our side closing the socket');
    expect(got).toEqual(['0:before']);
  });

  it('with several lanes, ends only its lane and closes the link after the grace period', async () => {
    const { a, got, gone } = await server(2);
    const hello = { worker: 'abcdefabcdefabcd', instance: 'raw', session: 9, lanes: 2 };
    const lane0 = await rawPeer(a.addresses[0]!, sockets, { ...hello, lane: 0 });
    await waitFor(() => lane0.frames.length === 1, 5_000, 'the lane-0 answer');
    const lane1 = await rawPeer(a.addresses[0]!, sockets, { ...hello, lane: 1 });
    await waitFor(() => a.peers().length === 1, 5_000, 'the two-lane raw peer established');
    const t0 = performance.now();
    lane0.send(encodeGoaway(new TransportError('ERR_CLOSED', 'bye')));
    lane0.send(MESSAGE_TOK('dropped'));
    lane1.send(MESSAGE_TOK('still delivered'));
    await waitFor(() => got.length === 1, 5_000, 'the lane-1 message');
    expect(got).toEqual(['1:still delivered']);
    expect((await within(gone, 5_000, 'the grace-period close')).reason).toContain('bye');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(GOAWAY_CLOSE_GRACE_MS - 50);
    expect(got).toEqual(['1:still delivered']);
  });

  it('a GOAWAY that does not decode closes the link with ERR_MALFORMED_ENVELOPE', async () => {
    const { a, got, gone } = await server();
    const raw = await rawPeer(a.addresses[0]!, sockets);
    await waitFor(() => a.peers().length === 1, 5_000, 'the raw peer established');
    raw.send(Uint8Array.from([0xf1, 0xc1]));
    raw.send(MESSAGE_TOK('after'));
    expect((await within(gone, 5_000, 'the link closing')).code).toBe('ERR_MALFORMED_ENVELOPE');
    await within(raw.closed, 5_000, 'the socket closing');
    const goaway = raw.frames.find((f) => f[0] === 0xf1);
    expect(goaway === undefined ? undefined : decodeGoaway(goaway).code).toBe('ERR_MALFORMED_ENVELOPE');
    expect(got).toEqual([]);
  });
});
