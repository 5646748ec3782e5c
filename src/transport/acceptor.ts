/**
 * The acceptor side of the hello (docs/protocol.md §3.3): bounded connections in their hello,
 * `authenticate` before anything is answered (docs/protocol.md §3.6), lanes grouped by the dialler's
 * session and claim token, then the link handed to the transport.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import type { AuthRequest } from './auth.ts';
import { ConnPort, swallow, type HandshakeOwner } from './conn-port.ts';
import { TransportError } from './errors.ts';
import { KIND_GOAWAY, decodeGoaway, decodeHello, encodeHello, type Hello } from './hello.ts';
import type { CloseMode, Connection, TransportAdapter } from './port.ts';
import { randomHex, type TimerHandle } from '../runtime/runtime.ts';
import type { TransportImpl } from './transport.ts';

interface Group {
  readonly key: string;
  readonly hello: Hello;
  readonly lanes: number;
  readonly ports: (ConnPort | undefined)[];
  filled: number;
  /** Token issued in the lane-0 answer: the later lanes present it, and so does a reconnect that supersedes the link. */
  readonly claim: string;
  /** The lane-0 HELLO carried a `claim` field (a dialler of this version): its later lanes must present the token. */
  readonly claims: boolean;
  /** What `authenticate` returned, when the adapter authenticates. */
  readonly identity: string | undefined;
}

/** Takes inbound connections through their hello into links (one per transport). */
export class Acceptor implements HandshakeOwner {
  readonly #t: TransportImpl;
  readonly #groups = new Map<string, Group>();
  /** Connections in their hello, oldest first (a Map keeps insertion order). */
  readonly #pending = new Map<ConnPort, TimerHandle>();
  /** `authenticate` calls that have not settled (their ports may be gone). */
  #authInFlight = 0;

  constructor(t: TransportImpl) {
    this.#t = t;
  }

  accept(conn: Connection, adapter?: TransportAdapter): void {
    const port = new ConnPort(conn, this, adapter, (r) => this.#t.refused(r));
    if (this.#t.isClosed) {
      conn.start(port);
      port.reject(new TransportError('ERR_CLOSED', 'this node is closing'), 'abort');
      return;
    }
    const max = this.#t.options.maxHandshakes;
    if (this.#pending.size >= max) {
      // Evict the oldest silent connection rather than refuse the new one: sockets that never send a
      // HELLO then delay a new peer only while they arrive faster than it says hello.
      // Silent sockets (no HELLO yet) go first; a port waiting on authenticate or on its lanes only if none is.
      let oldest: ConnPort | undefined;
      for (const p of this.#pending.keys()) {
        if (!p.authPending && !p.helloDone) {
          oldest = p;
          break;
        }
      }
      oldest ??= this.#pending.keys().next().value as ConnPort;
      this.#t.refused('handshake_evicted');
      this.#fail(
        oldest,
        new TransportError(
          'ERR_EVICTED',
          `connection from ${oldest.conn.remote} evicted: ${max} connections were in their hello`,
          { retryable: true },
        ),
        'abort',
      );
    }
    this.#pending.set(
      port,
      this.#t.runtime.setTimer(() => {
        // ERR_CONNECT, not ERR_HANDSHAKE: a slow hello (or a slow authenticate) is worth a retry, and a
        // reconnecting client treats ERR_HANDSHAKE as terminal.
        this.#fail(
          port,
          new TransportError(
            'ERR_CONNECT',
            `no complete hello from ${conn.remote} within ${this.#t.options.helloTimeoutMs} ms`,
            { retryable: true },
          ),
        );
      }, this.#t.options.helloTimeoutMs),
    );
    conn.start(port);
  }

  onMessage(port: ConnPort, bytes: Uint8Array): void {
    if (port.helloDone || port.authPending) {
      // A lane of a group still forming: the dialler sends nothing before our answer.
      this.#fail(
        port,
        new TransportError(
          'ERR_PROTOCOL',
          `message on lane ${port.lane} from ${port.conn.remote} before the link was established`,
        ),
      );
      return;
    }
    if (bytes[0] === KIND_GOAWAY) {
      this.#fail(port, decodeGoaway(bytes), 'abort');
      return;
    }
    const id = this.#t.options.identity;
    const h = decodeHello(bytes, id.protocolVersion);
    if (h instanceof LanemuxError) {
      this.#fail(port, h);
      return;
    }
    if (h.worker === this.#t.selfId) {
      this.#fail(
        port,
        new TransportError('ERR_HANDSHAKE', `connected to itself (worker ${h.worker}); refusing a self link`),
      );
      return;
    }
    if (h.lane !== 0) {
      this.#laneK(port, h);
      return;
    }
    if (this.#groups.has(groupKey(h))) {
      this.#fail(
        port,
        new TransportError('ERR_HANDSHAKE', `duplicate lane 0 for session ${h.session} of worker ${h.worker}`),
      );
      return;
    }
    const auth = port.adapter?.authenticate ?? this.#t.options.authenticate;
    if (auth === undefined) {
      this.#lane0(port, h, undefined);
      return;
    }
    // Authenticate before answering or learning anything more from the peer. Calls in flight are
    // bounded like handshakes (an evicted port's call still runs to its end, so it counts until then).
    if (this.#authInFlight >= this.#t.options.maxHandshakes) {
      this.#fail(
        port,
        new TransportError('ERR_TOO_MANY_PEERS', `${this.#authInFlight} authentications are in flight; try again`, {
          retryable: true,
        }),
      );
      return;
    }
    this.#authInFlight++;
    port.authPending = true;
    let settled = false;
    const settle = (identity: unknown): void => {
      if (settled) return;
      settled = true;
      this.#authInFlight--;
      // Closed, timed out or evicted meanwhile: nothing to do.
      if (!port.authPending || port.owner !== this) return;
      port.authPending = false;
      if (this.#t.isClosed) {
        this.#fail(port, new TransportError('ERR_CLOSED', 'this node is closing'));
        return;
      }
      if (typeof identity !== 'string' || identity.length === 0) {
        this.#t.refused('unauthenticated');
        this.#fail(
          port,
          new TransportError(
            'ERR_UNAUTHENTICATED',
            `authentication refused for worker ${h.worker} from ${port.conn.remote}`,
          ),
        );
        return;
      }
      this.#lane0(port, h, identity);
    };
    const request: AuthRequest = {
      transport: port.adapter?.name ?? 'unknown',
      remote: port.conn.remote,
      credential: h.credential,
      worker: h.worker,
      request: port.conn.request,
    };
    let verdict: unknown;
    try {
      verdict = auth(request);
    } catch {
      verdict = null;
    }
    if (verdict !== null && typeof verdict === 'object' && typeof (verdict as { then?: unknown }).then === 'function') {
      (verdict as Promise<unknown>).then(settle, () => settle(null));
    } else {
      settle(verdict);
    }
  }

  /** Lane 0 of a new link, authenticated (`identity`) or not. */
  #lane0(port: ConnPort, h: Hello, identity: string | undefined): void {
    // Capacity is checked after authentication: a peer that is refused must not evict anyone.
    if (
      !this.#t.hasLink(h.worker) &&
      this.#t.linkCount + this.#groups.size >= this.#t.options.maxPeers &&
      !this.#t.evictIdleLink()
    ) {
      this.#fail(
        port,
        new TransportError('ERR_TOO_MANY_PEERS', `this node already has ${this.#t.options.maxPeers} peers`, {
          retryable: true,
        }),
      );
      return;
    }
    const refusal = this.#t.claimRefusal(h, identity);
    if (refusal !== undefined) {
      this.#fail(port, refusal);
      return;
    }
    const key = groupKey(h);
    if (this.#groups.has(key)) {
      this.#fail(
        port,
        new TransportError('ERR_HANDSHAKE', `duplicate lane 0 for session ${h.session} of worker ${h.worker}`),
      );
      return;
    }
    const lanes = Math.min(h.lanes, this.#t.options.identity.lanes);
    const group: Group = {
      key,
      hello: h,
      lanes,
      ports: new Array<ConnPort | undefined>(lanes).fill(undefined),
      filled: 0,
      // A fresh claim token: 128 bits from the CSPRNG, as 32 lower-case hex digits.
      claim: randomHex(this.#t.runtime, 16),
      claims: h.claim !== undefined,
      identity,
    };
    this.#groups.set(key, group);
    this.#join(port, h, group);
  }

  /** Lane 1.. of a link being formed: it must fit its lane 0 and present the claim token of its answer. */
  #laneK(port: ConnPort, h: Hello): void {
    const group = this.#groups.get(groupKey(h));
    if (group === undefined) {
      this.#fail(
        port,
        new TransportError('ERR_HANDSHAKE', `lane ${h.lane} of session ${h.session} arrived without its lane 0`),
      );
      return;
    }
    if (
      h.lanes !== group.lanes ||
      h.lane >= group.lanes ||
      group.ports[h.lane] !== undefined ||
      h.instance !== group.hello.instance
    ) {
      this.#fail(
        port,
        new TransportError(
          'ERR_HANDSHAKE',
          `lane ${h.lane}/${h.lanes} does not fit session ${h.session} (${group.lanes} lanes)`,
        ),
      );
      return;
    }
    if (group.claims && h.claim !== group.claim) {
      // Only the dialler read the lane-0 answer: anyone else naming its session cannot join the link.
      this.#fail(
        port,
        new TransportError(
          'ERR_HANDSHAKE',
          `lane ${h.lane} of session ${h.session} does not present the claim token of its lane 0`,
        ),
      );
      return;
    }
    this.#join(port, h, group);
  }

  #join(port: ConnPort, h: Hello, group: Group): void {
    const id = this.#t.options.identity;
    port.helloDone = true;
    port.lane = h.lane;
    group.ports[h.lane] = port;
    group.filled++;
    port.conn.setFrameLimit(id.maxMessageSize);
    const answer = encodeHello({
      protocolVersion: id.protocolVersion,
      worker: this.#t.selfId,
      instance: id.instanceId,
      session: h.session,
      lane: h.lane,
      lanes: group.lanes,
      maxMessageSize: id.maxMessageSize,
      keys: id.transportKeys,
      address: this.#t.addresses[0],
      window: id.window,
      claim: h.lane === 0 ? group.claim : undefined,
    });
    // The answer goes out first so that it precedes anything the new link sends on this lane; the
    // link is established in the same task, before the dialler can possibly react to the answer.
    swallow(port.conn.send(answer));
    if (group.filled === group.lanes) {
      this.#groups.delete(group.key);
      const ports = group.ports as ConnPort[];
      for (const p of ports) this.#clearPending(p);
      // A link to the same worker may have formed while this one did: the same rule decides again.
      const refusal = this.#t.claimRefusal(group.hello, group.identity);
      if (refusal !== undefined) {
        for (const p of ports) p.reject(refusal);
        return;
      }
      this.#t.register(group.hello, group.lanes, ports, undefined, group.claim, group.identity);
    }
  }

  onClosed(port: ConnPort, error: LanemuxError): void {
    this.#fail(port, error, 'abort');
  }

  #clearPending(port: ConnPort): void {
    const timer = this.#pending.get(port);
    if (timer !== undefined) {
      this.#t.runtime.clearTimer(timer);
      this.#pending.delete(port);
    }
  }

  /** Fail a connection and, if it belongs to a forming group, the whole group. */
  #fail(port: ConnPort, error: LanemuxError, mode: CloseMode = 'graceful'): void {
    this.#clearPending(port);
    port.authPending = false;
    port.reject(error, mode);
    for (const [key, g] of this.#groups) {
      if (!g.ports.includes(port)) continue;
      this.#groups.delete(key);
      for (const p of g.ports) {
        if (p === undefined || p === port) continue;
        this.#clearPending(p);
        p.reject(error);
      }
    }
  }

  close(): void {
    const err = new TransportError('ERR_CLOSED', 'this node is closing');
    for (const port of [...this.#pending.keys()]) this.#fail(port, err);
  }
}

/** The key of a link being formed: the dialler's worker, instance and session. */
function groupKey(h: Hello): string {
  return `${h.worker}/${h.instance}/${h.session}`;
}
