/**
 * Option validation shared by adapters and the messenger: zod/mini at the boundary, one
 * `ERR_CONFIG` error naming every bad field.
 *
 * @packageDocumentation
 */
import { z } from 'zod/mini';
import { int, parse } from '../validate.ts';
import { TransportError } from './errors.ts';
import { DEFAULT_HIGH_WATER_MARK, DEFAULT_MAX_PENDING_BYTES } from './port.ts';

/** Parse `input` with `schema`, or throw `ERR_CONFIG` naming the function and the bad fields. */
export function parseOptions<S extends z.ZodMiniType>(schema: S, input: unknown, where: string): z.output<S> {
  const r = parse(schema, input ?? {});
  if (!r.success) throw new TransportError('ERR_CONFIG', `invalid options for ${where}: ${z.prettifyError(r.error)}`);
  return r.data;
}

/** Admission limits every socket adapter accepts. */
export const admissionSchema = {
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  highWaterMark: z._default(int(16 * 1024, 2 ** 40), DEFAULT_HIGH_WATER_MARK),
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  maxPendingBytes: z._default(int(1024, 2 ** 40), DEFAULT_MAX_PENDING_BYTES),
};
