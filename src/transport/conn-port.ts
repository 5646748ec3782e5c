/**
 * One lane connection as the peer layer sees it: routes the connection's events to whoever owns it
 * now — the handshake ({@link HandshakeOwner}: an acceptor or a dial), then the established link.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { encodeGoaway } from './hello.ts';
import type { Link } from './link.ts';
import type { Admission, CloseMode, Connection, ConnectionReceiver, TransportAdapter } from './port.ts';
import type { RefusalReason } from './transport.ts';

/** Routes one connection's events to whoever owns it now: a handshake, then a link. */
export class ConnPort implements ConnectionReceiver {
  readonly conn: Connection;
  /** The adapter that accepted or dialled the connection (its `authenticate`, its name). */
  readonly adapter: TransportAdapter | undefined;
  lane = 0;
  link: Link | undefined;
  owner: HandshakeOwner | undefined;
  /** HELLO processed (acceptor) or answered (dialler). */
  helloDone = false;
  /** Acceptor: the lane-0 HELLO waits for `authenticate`; nothing else may arrive meanwhile. */
  authPending = false;

  readonly #refused: ((reason: RefusalReason) => void) | undefined;

  constructor(
    conn: Connection,
    owner: HandshakeOwner,
    adapter?: TransportAdapter,
    refused?: (reason: RefusalReason) => void,
  ) {
    this.conn = conn;
    this.owner = owner;
    this.adapter = adapter;
    this.#refused = refused;
  }

  message(bytes: Uint8Array): void {
    if (this.link !== undefined) this.link.deliver(this.lane, bytes);
    else this.owner?.onMessage(this, bytes);
  }

  closed(error: LanemuxError): void {
    if (error.code === 'ERR_FRAME_DEADLINE') this.#refused?.('frame_deadline');
    if (this.link !== undefined) this.link.connClosed(this.lane, error);
    else this.owner?.onClosed(this, error);
  }

  /** Tell the peer why, then close. */
  reject(error: LanemuxError, mode: CloseMode = 'graceful'): void {
    this.owner = undefined;
    if (mode === 'graceful') swallow(this.conn.send(encodeGoaway(error)));
    this.conn.close(error, mode);
  }
}

/** Who owns a connection during its hello: the acceptor (`acceptor.ts`) or a dial (`dial.ts`). */
export interface HandshakeOwner {
  onMessage(port: ConnPort, bytes: Uint8Array): void;
  onClosed(port: ConnPort, error: LanemuxError): void;
}

/** Ignore the outcome of a best-effort send (GOAWAY, error replies). */
export function swallow(admission: Admission): void {
  if (admission !== true) admission.catch(() => {});
}
