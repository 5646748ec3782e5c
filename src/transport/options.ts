/**
 * Option validation shared by adapters and the messenger: zod at the boundary, one `ERR_CONFIG`
 * error naming every bad field.
 *
 * @packageDocumentation
 */
import { z } from 'zod';
import { TransportError } from './errors.ts';
import { DEFAULT_HIGH_WATER_MARK, DEFAULT_MAX_PENDING_BYTES } from './port.ts';

/** Parse `input` with `schema`, or throw `ERR_CONFIG` naming the function and the bad fields. */
export function parseOptions<S extends z.ZodType>(schema: S, input: unknown, where: string): z.output<S> {
  const r = schema.safeParse(input ?? {});
  if (!r.success) throw new TransportError('ERR_CONFIG', `invalid options for ${where}: ${z.prettifyError(r.error)}`);
  return r.data;
}

/** Admission limits every socket adapter accepts. */
export const admissionSchema = {
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  highWaterMark: z.number().int().min(16 * 1024).max(2 ** 40).default(DEFAULT_HIGH_WATER_MARK),
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  maxPendingBytes: z.number().int().min(1024).max(2 ** 40).default(DEFAULT_MAX_PENDING_BYTES),
};
