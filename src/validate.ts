/**
 * Validation at the boundary with `zod/mini`: its functional API lets a bundler keep only the schema
 * kinds and checks lanemux uses (the full `zod` build costs a browser page ~20 kB brotli).
 *
 * `zod/mini` loads no locale, so every message would read "Invalid input". Parses here pass zod's
 * English messages per call (the ones full `zod` gives) instead of setting the global `z.config()`,
 * which belongs to the application.
 *
 * @packageDocumentation
 */
import { en } from 'zod/locales';
import { z } from 'zod/mini';
import { ConfigError } from './errors.ts';

/** The parse context every lanemux parse uses: zod's English messages. */
const MESSAGES: z.core.ParseContext<z.core.$ZodIssue> = { error: en().localeError };

/** The result of a parse: the data, or the zod error with its issues. */
export type ParseResult<T> = z.core.util.SafeParseResult<T>;

/** `schema.safeParse(input)` with zod's English messages. */
export function parse<S extends z.ZodMiniType>(schema: S, input: unknown): ParseResult<z.output<S>> {
  return schema.safeParse(input, MESSAGES);
}

/** A schema reduced to its `safeParse` (with zod's English messages), for schemas other modules parse with. */
export interface Parser<T> {
  safeParse(input: unknown): ParseResult<T>;
}

/**
 * Wrap `schema` as a {@link Parser}. `fast`, when given, reads the common well-formed shape of a
 * message cheaply and returns undefined for anything else, which zod then parses (so every refusal
 * and its message is zod's). It must never accept what the schema refuses, nor return another value.
 */
export function parser<S extends z.ZodMiniType>(
  schema: S,
  fast?: (input: unknown) => z.output<S> | undefined,
): Parser<z.output<S>> {
  if (fast === undefined) return { safeParse: (input) => parse(schema, input) };
  return {
    safeParse: (input) => {
      const data = fast(input);
      return data !== undefined ? { success: true, data } : parse(schema, input);
    },
  };
}

/** An integer in `[min, max]` (full zod's `z.number().int().min(min).max(max)`). */
export function int(min: number, max?: number): z.ZodMiniNumber<number> {
  return z.number().check(z.int(), z.gte(min), ...(max === undefined ? [] : [z.lte(max)]));
}

/** A finite number in `[min, max]` (zod numbers refuse `±Infinity` and `NaN`). */
export function num(min: number, max?: number): z.ZodMiniNumber<number> {
  return z.number().check(z.gte(min), ...(max === undefined ? [] : [z.lte(max)]));
}

/** A string of at most `max` characters (and at least `min`). */
export function str(max: number, min = 0): z.ZodMiniString<string> {
  return z.string().check(...(min > 0 ? [z.minLength(min)] : []), z.maxLength(max));
}

/** Parse `input` with `schema`, or throw a {@link ConfigError} naming the function and every bad field. */
export function parseOptions<S extends z.ZodMiniType>(schema: S, input: unknown, where: string): z.output<S> {
  const r = parse(schema, input ?? {});
  if (!r.success) throw configError(r.error, { where });
  return r.data;
}

/**
 * The {@link ConfigError} for a failed parse: its fields are the issues' dotted paths (`prefix`
 * before each, every unrecognized key on its own). With `where` the message is zod's pretty listing
 * of every issue; without, `invalid config <field>: <reason>` and the other issues after it.
 */
export function configError(
  error: z.core.$ZodError,
  options: { readonly where?: string; readonly prefix?: string } = {},
): ConfigError {
  const prefix = options.prefix ?? '';
  const fields = issueFields(error.issues, prefix);
  const first = fields[0] ?? (prefix.replace(/\.$/, '') || 'options');
  if (options.where !== undefined)
    return new ConfigError(first, z.prettifyError(error), { fields, where: options.where });
  let detail = error.issues[0]?.message ?? 'invalid';
  for (let i = 1; i < error.issues.length; i++) {
    const issue = error.issues[i]!;
    detail += `; ${issueField(issue, prefix)}: ${issue.message}`;
  }
  return new ConfigError(first, detail, { fields });
}

/** The dotted field an issue is about (its unrecognized keys joined with commas). */
function issueField(issue: z.core.$ZodIssue, prefix: string): string {
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') return issue.keys.map((k) => prefix + (path ? `${path}.${k}` : k)).join(',');
  return path ? prefix + path : prefix.replace(/\.$/, '') || 'options';
}

/** Every field the issues name, in order, without repeats (each unrecognized key on its own). */
export function issueFields(issues: readonly z.core.$ZodIssue[], prefix = ''): string[] {
  const out: string[] = [];
  for (const issue of issues) {
    const path = issue.path.map(String).join('.');
    const named =
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((k) => prefix + (path ? `${path}.${k}` : k))
        : [path ? prefix + path : prefix.replace(/\.$/, '') || 'options'];
    for (const f of named) if (!out.includes(f)) out.push(f);
  }
  return out;
}
