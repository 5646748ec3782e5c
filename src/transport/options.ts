/**
 * Option validation shared by adapters, the messenger and the node: zod/mini at the boundary, one
 * {@link ConfigError} (`ERR_INVALID_CONFIG`) naming every bad field.
 *
 * @packageDocumentation
 */
import { z } from 'zod/mini';
import { ConfigError } from '../errors.ts';
import { int, parse } from '../validate.ts';
import { DEFAULT_HIGH_WATER_MARK, DEFAULT_MAX_PENDING_BYTES } from './port.ts';

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
export function configError(error: z.core.$ZodError, options: { readonly where?: string; readonly prefix?: string } = {}): ConfigError {
  const prefix = options.prefix ?? '';
  const fields = issueFields(error.issues, prefix);
  const first = fields[0] ?? (prefix.replace(/\.$/, '') || 'options');
  if (options.where !== undefined) return new ConfigError(first, z.prettifyError(error), { fields, where: options.where });
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
    const named = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => prefix + (path ? `${path}.${k}` : k)) : [path ? prefix + path : prefix.replace(/\.$/, '') || 'options'];
    for (const f of named) if (!out.includes(f)) out.push(f);
  }
  return out;
}

/** Admission limits every socket adapter accepts. */
export const admissionSchema = {
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  highWaterMark: z._default(int(16 * 1024, 2 ** 40), DEFAULT_HIGH_WATER_MARK),
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  maxPendingBytes: z._default(int(1024, 2 ** 40), DEFAULT_MAX_PENDING_BYTES),
};
