/**
 * zod's explanation of a `connect` option the client's own check refused. Loaded on demand (a
 * dynamic import from client.ts), so a page that passes good options ships neither this module nor
 * zod: the hand-written range check answers the well-formed case, zod, the validator of record,
 * words the refusal.
 */
import * as z from '../schema.ts';
import { int } from '../validate.ts';

/** The first refused field and zod's message for every issue, or undefined when zod accepts the options. */
export async function explainOptions(
  limits: Readonly<Record<string, readonly [min: number, max: number, def: number]>>,
  options: Readonly<Record<string, unknown>>,
): Promise<{ field: string; fields: string[]; message: string } | undefined> {
  const shape: Record<string, z.ZodMiniType> = {};
  const input: Record<string, unknown> = {};
  for (const [k, [min, max]] of Object.entries(limits)) {
    shape[k] = z.optional(int(min, max));
    if (options[k] !== undefined) input[k] = options[k];
  }
  const r = await z.explain(z.object(shape), input);
  if (r.success) return undefined;
  const fields = r.error.issues.map((i) => i.path.join('.'));
  return { field: fields[0] ?? '', fields, message: r.message };
}
