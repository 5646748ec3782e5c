/**
 * Anchor handles: a u128 = WorkerId (high 64) ‖ local id (low 64) (docs/protocol.md §8 "Anchor handle"). The WorkerId
 * half is the batching key; the local id is random (a CSPRNG), so a peer cannot guess an
 * (anchor, session) pair. Bit 63 of the local id marks MPSC anchors.
 */
import { StreamError } from './errors.ts';

/** A parsed anchor handle. */
export interface AnchorHandle {
  /** The consumer's 64-bit worker id: the routing key. */
  readonly workerId: bigint;
  /** The anchor's local id on that worker. */
  readonly localId: bigint;
}

const PREFIX = 'lmx1.';
const HANDLE_RE = /^lmx1\.([0-9a-f]{16})([0-9a-f]{16})$/;

const hex16 = (v: bigint): string => v.toString(16).padStart(16, '0');

/**
 * The last worker id formatted or parsed, as `lmx1.` + its 16 hex digits: a node makes and reads
 * handles of one or a few workers, so this saves a bigint format or parse per handle.
 */
let lastWorker = 0n;
let lastPrefix = `${PREFIX}${hex16(0n)}`;

/** `lmx1.` + the worker's 16 hex digits. */
function workerPrefix(workerId: bigint): string {
  if (workerId !== lastWorker) {
    lastWorker = workerId;
    lastPrefix = `${PREFIX}${hex16(workerId)}`;
  }
  return lastPrefix;
}

/** Serialise a handle: `lmx1.` + 32 lower-case hex digits. */
export function formatHandle(h: AnchorHandle): string {
  return `${workerPrefix(BigInt.asUintN(64, h.workerId))}${hex16(BigInt.asUintN(64, h.localId))}`;
}

/** Length of a handle: `lmx1.` + 32 hex digits. */
const HANDLE_LENGTH = PREFIX.length + 32;

/** Parse a handle string. Throws `ERR_INVALID_HANDLE` for anything else. */
export function parseHandle(text: string): AnchorHandle {
  // The usual handle names the last worker seen: no regex match and one bigint parse.
  if (typeof text === 'string' && text.length === HANDLE_LENGTH && text.startsWith(lastPrefix)) {
    const local = text.slice(HANDLE_LENGTH - 16);
    if (isLowerHex(local)) return { workerId: lastWorker, localId: BigInt(`0x${local}`) };
  }
  const m = typeof text === 'string' ? HANDLE_RE.exec(text) : null;
  if (!m)
    throw new StreamError(
      'ERR_INVALID_HANDLE',
      `not a lanemux anchor handle: ${JSON.stringify(String(text).slice(0, 48))}`,
    );
  const workerId = BigInt(`0x${m[1]!}`);
  workerPrefix(workerId);
  return { workerId, localId: BigInt(`0x${m[2]!}`) };
}

/** True when every character of `s` is 0-9 or a-f. */
function isLowerHex(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

/** A worker id as the messenger's peer key (16 hex digits). */
export function workerKey(workerId: bigint): string {
  return hex16(BigInt.asUintN(64, workerId));
}

/** A u64 as hex (control plane encoding of 64-bit fields). */
export function u64Hex(v: bigint): string {
  return `0x${BigInt.asUintN(64, v).toString(16)}`;
}
