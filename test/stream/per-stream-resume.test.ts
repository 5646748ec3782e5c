// The per-stream path (`tcp-stream`, docs/protocol.md §9) never resumes (§8.3): a node with resume on
// ends a stream whose connection was lost before its terminal with a retryable ResumeFailedError,
// reason `unsupported`, on whichever side has resume on; a node with resume off keeps the plain error.
// Two nodes on the in-process LoopMessenger pair for the control plane, real loopback TCP for the stream.
import { afterEach, describe, expect, it } from 'vitest';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import type { MuxConfig } from '../../src/mux/config.ts';
import { ResumeFailedError } from '../../src/stream/errors.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { PerStreamConnection, PerStreamSink, PerStreamTransport } from '../../src/stream/per-stream.ts';
import type { ResumeOptions } from '../../src/stream/resume-options.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

/** A tcp-stream transport whose connections (dialled) and sinks (accepted) the test can reach. */
function reachable(): { transport: PerStreamTransport; conns: PerStreamConnection[]; sinks: PerStreamSink[] } {
  const inner = tcpStreamTransport();
  const conns: PerStreamConnection[] = [];
  const sinks: PerStreamSink[] = [];
  const transport: PerStreamTransport = {
    key: inner.key,
    get writes() {
      return inner.writes;
    },
    close: () => inner.close(),
    connect: async (endpoint, anchorId, sessionId, options) => {
      const c = await inner.connect(endpoint, anchorId, sessionId, options);
      conns.push(c);
      return c;
    },
    listen: (accept) =>
      inner.listen((anchorId, sessionId) => {
        const sink = accept(anchorId, sessionId);
        if (sink !== null) sinks.push(sink);
        return sink;
      }),
  };
  return { transport, conns, sinks };
}

interface Side {
  mux?: MuxConfig;
  resume?: ResumeOptions | false;
}

async function setup(c: Side, p: Side) {
  const [a, b] = LoopMessenger.pair();
  const cs = reachable();
  const ps = reachable();
  const consumer = await createNode({ messenger: a, perStream: cs.transport, ...c });
  const producer = await createNode({ messenger: b, perStream: ps.transport, ...p });
  nodes.push(consumer, producer);
  const anchor = consumer.createAnchor<string>();
  const sender = await producer.attachAnchor<string>(anchor.handle);
  expect(sender.negotiatedTransport).toBe('tcp-stream');
  await waitFor(() => cs.sinks.length === 1 && ps.conns.length === 1);
  for (let i = 0; i < 5; i++) await sender.send(`${i}`);
  return { anchor, sender, sink: cs.sinks[0]!, conn: ps.conns[0]! };
}

/** Read `anchor` to its end: the items so far (live), and the outcome. */
function readToEnd(anchor: AsyncIterable<string>): { items: string[]; done: Promise<unknown> } {
  const items: string[] = [];
  const done = (async () => {
    try {
      for await (const v of anchor) items.push(v);
      return null;
    } catch (error) {
      return error;
    }
  })();
  return { items, done };
}

describe('the per-stream path does not resume: a lost connection says so', () => {
  it('consumer with resume on: its reader reads what arrived, then ends retryable ResumeFailedError "unsupported"', async () => {
    const { anchor, conn } = await setup({}, { mux: { enabled: false } });
    const r = readToEnd(anchor);
    await waitFor(() => r.items.length === 5);
    // The connection goes with the producer's socket (not a terminal).
    conn.destroy();
    const error = await r.done;
    expect(r.items).toEqual(['0', '1', '2', '3', '4']);
    expect(error).toBeInstanceOf(ResumeFailedError);
    expect(error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'unsupported' });
    expect(String((error as Error).message)).toMatch(/per-stream path \(tcp-stream\) does not resume/);
  });

  it('producer with resume on: the connection reset under it ends the sender retryable ResumeFailedError "unsupported"', async () => {
    const { sender, sink } = await setup({ mux: { enabled: false } }, {});
    // The transport's own reset, as a network cut looks to the producer.
    sink.abort?.(new ResumeFailedError('ERR_SENDER_DROPPED', 'window', 'cut'));
    await waitFor(() => sender.closed);
    expect(sender.cancelSignal.reason).toBeInstanceOf(ResumeFailedError);
    expect(sender.cancelSignal.reason).toMatchObject({
      code: 'ERR_SENDER_DROPPED',
      retryable: true,
      reason: 'unsupported',
    });
  });

  it('a consumer with resume off keeps the plain retryable ERR_SENDER_DROPPED', async () => {
    const { anchor, conn } = await setup({ resume: false }, { mux: { enabled: false } });
    const r = readToEnd(anchor);
    await waitFor(() => r.items.length === 5);
    conn.destroy();
    const error = await r.done;
    expect(error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
    expect(error).not.toBeInstanceOf(ResumeFailedError);
  });
});
