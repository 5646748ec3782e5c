/**
 * Option schemas shared by the socket adapters. Parsing and the one `ConfigError`
 * (`ERR_INVALID_CONFIG`) naming every bad field live in `validate.ts`, shared by every layer.
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { int } from '../validate.ts';
import { DEFAULT_HIGH_WATER_MARK, DEFAULT_MAX_PENDING_BYTES } from './port.ts';

/** Admission limits every socket adapter accepts. */
export const admissionSchema = {
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  highWaterMark: z._default(int(16 * 1024, 2 ** 40), DEFAULT_HIGH_WATER_MARK),
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  maxPendingBytes: z._default(int(1024, 2 ** 40), DEFAULT_MAX_PENDING_BYTES),
};
