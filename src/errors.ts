/**
 * The one error base of lanemux.
 *
 * Every error the library raises or reports is a {@link LanemuxError} with a stable `code`
 * (`ERR_*`). The message is prose for humans; `code` is the contract. Errors are branded with
 * `Symbol.for('lanemux.error')` so `instanceof` works across duplicate copies of the package.
 *
 * Each area (wire, credit, transport, messenger, mux, stream) declares its own code union and,
 * where useful, its own subclass; they all share this base.
 *
 * @packageDocumentation
 */

const BRAND: unique symbol = Symbol.for('lanemux.error') as never;

/** Options accepted by every lanemux error. */
export interface LanemuxErrorOptions {
  /** The underlying error, if any. */
  readonly cause?: unknown;
  /** True when retrying the same operation later may succeed. Defaults to false. */
  readonly retryable?: boolean;
}

/** Base class of every lanemux error: a stable `code`, a `retryable` hint and a `cause`. */
export class LanemuxError<C extends string = string> extends Error {
  /** Stable machine-readable code, e.g. `ERR_CREDIT_VIOLATION`. */
  readonly code: C;
  /** True when retrying the same operation later may succeed. */
  readonly retryable: boolean;
  declare readonly [BRAND]: true;

  constructor(code: C, message: string, options: LanemuxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
    Object.defineProperty(this, BRAND, { value: true });
  }

  override get name(): string {
    return this.constructor.name;
  }

  /** Brand check, so errors from another copy of lanemux still match. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (typeof value !== 'object' || value === null) return false;
    if (this === LanemuxError) return (value as { [BRAND]?: unknown })[BRAND] === true;
    return Function.prototype[Symbol.hasInstance].call(this, value);
  }
}

/** True if `value` is a lanemux error, optionally with the given code. */
export function isLanemuxError(value: unknown, code?: string): value is LanemuxError {
  return value instanceof LanemuxError && (code === undefined || value.code === code);
}

/** The code of a {@link ConfigError}: the one code of every configuration mistake. */
export type ConfigErrorCode = 'ERR_INVALID_CONFIG';

/** Options of a {@link ConfigError}. */
export interface ConfigErrorOptions {
  /** Every offending field (dotted paths). Defaults to `[field]`. */
  readonly fields?: readonly string[];
  /**
   * The function whose options are wrong (e.g. `tcpTransport`): the message then reads
   * `invalid options for <where>: <detail>`. Defaults to none: `invalid config <field>: <detail>`.
   */
  readonly where?: string;
  /** The underlying error, if any. */
  readonly cause?: unknown;
}

/**
 * An invalid configuration: a bad option of `createNode`, `createMessenger`, an adapter, the mux,
 * or a dev certificate. Always code `ERR_INVALID_CONFIG`, never retryable (the same options fail
 * again); the message names every bad field and says why.
 */
export class ConfigError extends LanemuxError<ConfigErrorCode> {
  /** Dotted path of the (first) offending field, e.g. `mux.initialCredit` or `lanes`. */
  readonly field: string;
  /** Dotted paths of every offending field, `field` first. */
  readonly fields: readonly string[];

  constructor(field: string, detail: string, options: ConfigErrorOptions = {}) {
    super(
      'ERR_INVALID_CONFIG',
      options.where === undefined
        ? `invalid config ${field}: ${detail}`
        : `invalid options for ${options.where}: ${detail}`,
      { cause: options.cause },
    );
    this.field = field;
    this.fields = Object.freeze(
      options.fields !== undefined && options.fields.length > 0 ? [...options.fields] : [field],
    );
  }
}
