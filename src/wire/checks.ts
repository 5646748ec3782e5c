/**
 * The checks hand-written readers of peer input share (HELLO, GOAWAY, error bodies, the page
 * client's control messages): each accepts exactly what the zod schema of the same rule accepts
 * (`z.number().check(z.int(), …)`, `z.string().check(min/maxLength)`, `z.object`), so a reader
 * built from them answers the well-formed case with no schema library in the bundle.
 */

/** A safe integer in `min..max` (zod's `int` with bounds). */
export function isInt(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max;
}

/** A string of `min..max` UTF-16 code units (zod's `min/maxLength`). */
export function isText(v: unknown, max: number, min = 0): v is string {
  return typeof v === 'string' && v.length >= min && v.length <= max;
}

/** An object that is not an array (what a MessagePack map decodes to; zod's `object` input). */
export function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
