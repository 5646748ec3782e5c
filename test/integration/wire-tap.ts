// A wire tap on the TCP adapter for the integration suites that check what goes over the wire
// (zero-RTT, lifecycle, lanes): every messenger message a node sends or receives is recorded, and a
// test may swallow its outbound side (`mute`), hold its outbound batches back (`holdBatches`) or
// write crafted frames on a dialled lane connection (`conns`).
import { expect } from 'vitest';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import type { Connection, ConnectionReceiver, TransportAdapter } from '../../src/transport/port.ts';
import { decodeBatch, type DecodedRecord } from '../../src/wire/decoder.ts';
import { open } from './helpers.ts';

/** One messenger message as the tap saw it, decoded just enough to count. */
export interface WireMsg {
  dir: 'in' | 'out';
  kind: number;
  /** Batch: the header's lane (-1 otherwise). */
  lane: number;
  /** Request: the handler name ('' otherwise). */
  name: string;
  /** Request/response id (-1 otherwise). */
  id: number;
  bytes: Uint8Array;
  /** Swallowed by `mute` (never reached the socket). */
  muted: boolean;
}

/** A batch's payload (without the 1-byte envelope) and the lane it rode. */
export interface TappedBatch {
  lane: number;
  payload: Uint8Array;
}

/** A decoded record and the lane of the batch it rode. */
export type TappedRecord = DecodedRecord & { lane: number };

/** Every messenger message one node sends or receives. */
export class Tap {
  readonly msgs: WireMsg[] = [];
  /** Dialled lane connections by lane (the dialler's side), for injecting crafted batches. */
  readonly conns: Connection[] = [];
  /** While set, every outbound message is swallowed (recorded as `muted`): the peer hears nothing. */
  mute = false;
  /** While set, outbound batches are kept back (in order) instead of written: the peer sees none of them. */
  holdBatches = false;
  readonly #held: Array<() => void> = [];

  /** Write every held batch, in order, and stop holding. */
  release(): void {
    this.holdBatches = false;
    for (const send of this.#held.splice(0)) send();
  }

  /** Keep a batch's write back until {@link release}. */
  hold(send: () => void): void {
    this.#held.push(send);
  }

  /** Forget the held batches (their connection is gone) and stop holding. */
  discard(): void {
    this.holdBatches = false;
    this.#held.length = 0;
  }

  record(dir: 'in' | 'out', bytes: Uint8Array, muted = false): void {
    const b = bytes.slice();
    const kind = b[0]!;
    let lane = -1;
    let name = '';
    let id = -1;
    if (kind === 0x01 && b.length >= 17) lane = b[2]! & 0x0f;
    if (kind >= 0x03 && kind <= 0x06 && b.length >= 5)
      id = ((b[1]! << 24) >>> 0) + ((b[2]! << 16) | (b[3]! << 8) | b[4]!);
    if (kind === 0x03) name = new TextDecoder().decode(b.subarray(6, 6 + b[5]!));
    this.msgs.push({ dir, kind, lane, name, id, bytes: b, muted });
  }

  /** Requests in a direction, all of them or those to one handler. */
  requests(dir: 'in' | 'out', name?: string): WireMsg[] {
    return this.msgs.filter((m) => m.dir === dir && m.kind === 0x03 && (name === undefined || m.name === name));
  }

  /** Batches in a direction. */
  batches(dir: 'in' | 'out'): TappedBatch[] {
    return Tap.batches(this.msgs.filter((m) => m.dir === dir));
  }

  /** Records of the batches in a direction, with the lane each rode. */
  records(dir: 'in' | 'out'): TappedRecord[] {
    return Tap.records(this.msgs.filter((m) => m.dir === dir));
  }

  /** Batches among `msgs`. */
  static batches(msgs: readonly WireMsg[]): TappedBatch[] {
    return msgs.filter((m) => m.kind === 0x01).map((m) => ({ lane: m.lane, payload: m.bytes.subarray(1) }));
  }

  /** Records of the batches among `msgs`, with the lane each rode; each batch must decode cleanly. */
  static records(msgs: readonly WireMsg[]): TappedRecord[] {
    const out: TappedRecord[] = [];
    for (const b of Tap.batches(msgs)) {
      const d = decodeBatch(b.payload);
      expect(d.error).toBeNull();
      for (const r of d.records) out.push({ ...r, lane: b.lane });
    }
    return out;
  }
}

function tapConnection(conn: Connection, tap: Tap): Connection {
  return {
    get remote() {
      return conn.remote;
    },
    start(receiver: ConnectionReceiver) {
      conn.start({
        message(bytes) {
          if (bytes[0]! < 0xf0) tap.record('in', bytes);
          receiver.message(bytes);
        },
        closed: (error) => receiver.closed(error),
      });
    },
    setFrameLimit: (n) => conn.setFrameLimit(n),
    send(head, body) {
      // Transport-level frames (0xf0 and up: hello, GOAWAY...) pass untapped.
      if (head[0]! < 0xf0) {
        const all = new Uint8Array(head.byteLength + (body?.byteLength ?? 0));
        all.set(head, 0);
        if (body) all.set(body, head.byteLength);
        tap.record('out', all, tap.mute);
        if (tap.mute) return true; // swallowed: the peer never hears it
        if (tap.holdBatches && head[0] === 0x01) {
          // Copies: the caller may reuse its buffers once send returns.
          const h = head.slice();
          const b = body?.slice();
          tap.hold(() => void conn.send(h, b));
          return true;
        }
      }
      return conn.send(head, body);
    },
    bufferedAmount: () => conn.bufferedAmount(),
    pause: () => conn.pause(),
    resume: () => conn.resume(),
    close: (reason, mode) => conn.close(reason, mode),
  };
}

/** `inner` with every connection it accepts or dials going through `tap`. */
export function tapped(inner: TransportAdapter, tap: Tap): TransportAdapter {
  return {
    name: inner.name,
    dialSchemes: inner.dialSchemes,
    listen: (host) =>
      inner.listen({
        get frameLimit() {
          return host.frameLimit;
        },
        get maxMessageSize() {
          return host.maxMessageSize;
        },
        accept: (conn) => host.accept(tapConnection(conn, tap)),
        runtime: host.runtime,
      }),
    dial: (request, events) =>
      inner.dial(request, {
        open: (conn) => {
          const c = tapConnection(conn, tap);
          tap.conns[request.lane] = c;
          events.open(c);
        },
        fail: (e) => events.fail(e),
      }),
    close: () => inner.close(),
  };
}

/** A node on loopback TCP (listening on a free port, or dialling only) with a tap; closed by `closeAll`. */
export async function tappedNode(
  options: Omit<NodeOptions, 'transports'> & { listen?: boolean } = {},
): Promise<{ node: LanemuxNode; tap: Tap }> {
  const { listen = true, ...rest } = options;
  const tap = new Tap();
  const node = await createNode({
    ...rest,
    transports: [tapped(tcpTransport(listen ? { port: 0 } : { listen: false }), tap)],
  });
  open.push(node);
  return { node, tap };
}

/** A consumer (listening) and a producer (dialling it) over loopback TCP, both tapped and connected. */
export async function tappedPair(mux: NodeOptions['mux'] = {}, consumerLanes = 8, producerLanes = consumerLanes) {
  const c = await tappedNode({ lanes: consumerLanes, mux });
  const p = await tappedNode({ listen: false, lanes: producerLanes, mux });
  await p.node.connect(c.node.address);
  return { consumer: c.node, producer: p.node, ctap: c.tap, ptap: p.tap };
}
