/**
 * Admission from the messenger's side: the refusal of a message too big for a link, made before the
 * transport sees it, and what to do with the admission of a send nobody waits for.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { TransportError } from '../transport/errors.ts';
import type { PeerState } from './peer-state.ts';
import type { Admission } from './types.ts';

/** `ERR_FRAME_TOO_LARGE` for a message of `size` bytes (envelope included) toward `st`. */
export function tooLarge(size: number, st: PeerState): LanemuxError {
  return new TransportError(
    'ERR_FRAME_TOO_LARGE',
    `message of ${size} bytes (envelope included) exceeds the ${st.link.maxMessageSize}-byte limit toward ${st.id}`,
  );
}

/** Drop a best-effort send's refusal (replies, notices, pongs, cancels): the link's end reports it. */
export function swallow(admission: Admission): void {
  if (admission !== true) admission.catch(() => {});
}
