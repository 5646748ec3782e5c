/**
 * Validation at the boundary. The schemas are built with `./schema.ts`, hand-written readers with
 * `zod/mini`'s API that accept exactly what the zod schemas of the same shape accept: a page parsing
 * well-formed input ships no zod. zod is loaded (dynamic `import()`) only to explain a refusal where
 * the API is already async ({@link parseOptionsAsync}); elsewhere the reader's own issues (zod's
 * English messages for the kinds it raises) are the error.
 *
 * @packageDocumentation
 */
import { ConfigError } from './errors.ts';
import * as z from './schema.ts';

/** A refusal's issue (zod's issue shape, reduced). */
export type Issue = z.Issue;

/** The result of a parse: the data, or the error with its issues. */
export type ParseResult<T> =
  | { success: true; data: T; error?: undefined }
  | { success: false; data?: undefined; error: { readonly issues: Issue[]; readonly message: string } };

/** `schema.safeParse(input)`. */
export function parse<S extends z.ZodMiniType>(schema: S, input: unknown): ParseResult<z.output<S>> {
  return schema.safeParse(input) as ParseResult<z.output<S>>;
}

/** A schema reduced to its `safeParse`, for schemas other modules parse with. */
export interface Parser<T> {
  safeParse(input: unknown): ParseResult<T>;
}

/**
 * Wrap `schema` as a {@link Parser}. `fast`, when given, reads the common well-formed shape of a
 * message cheaply and returns undefined for anything else, which the schema then parses (so every
 * refusal and its message is the schema's). It must never accept what the schema refuses, nor return another value.
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
 * {@link parseOptions} for an async API: a refusal is explained by zod itself (loaded on demand),
 * so the {@link ConfigError}'s message is zod's listing of every issue.
 */
export async function parseOptionsAsync<S extends z.ZodMiniType>(
  schema: S,
  input: unknown,
  where: string,
): Promise<z.output<S>> {
  const r = parse(schema, input ?? {});
  if (r.success) return r.data;
  throw await explainedError(schema, input ?? {}, r.error, { where });
}

/**
 * The {@link configError} for a refused `input`, its message from zod (loaded on demand). If zod
 * accepts what the reader refused, the reader is wrong: the reader's error stands, and says so.
 */
export async function explainedError(
  schema: z.ZodMiniType,
  input: unknown,
  error: { readonly issues: readonly Issue[] },
  options: { readonly where?: string; readonly prefix?: string } = {},
): Promise<ConfigError> {
  const zr = await z.explain(schema, input).catch(() => undefined);
  return configError(zr === undefined || zr.success ? error : (zr.error as { issues: Issue[] }), options);
}

/**
 * The {@link ConfigError} for a failed parse: its fields are the issues' dotted paths (`prefix`
 * before each, every unrecognized key on its own). With `where` the message is zod's pretty listing
 * of every issue; without, `invalid config <field>: <reason>` and the other issues after it.
 */
export function configError(
  error: { readonly issues: readonly Issue[] },
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
function issueField(issue: Issue, prefix: string): string {
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys')
    return (issue.keys ?? []).map((k) => prefix + (path ? `${path}.${k}` : k)).join(',');
  return path ? prefix + path : prefix.replace(/\.$/, '') || 'options';
}

/** Every field the issues name, in order, without repeats (each unrecognized key on its own). */
export function issueFields(issues: readonly Issue[], prefix = ''): string[] {
  const out: string[] = [];
  for (const issue of issues) {
    const path = issue.path.map(String).join('.');
    const named =
      issue.code === 'unrecognized_keys'
        ? (issue.keys ?? []).map((k) => prefix + (path ? `${path}.${k}` : k))
        : [path ? prefix + path : prefix.replace(/\.$/, '') || 'options'];
    for (const f of named) if (!out.includes(f)) out.push(f);
  }
  return out;
}
