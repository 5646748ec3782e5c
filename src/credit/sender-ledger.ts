/**
 * The owner's per-slot credit ledger (docs/protocol.md §10.7): C data credits plus one terminal
 * reserve. Control records are never blocked.
 */
import { CreditClass } from './classify.ts';
import { assertCount } from './count.ts';
import { MAX_CREDIT } from './constants.ts';
import { CreditError } from './errors.ts';
import { CreditOutcome } from './outcome.ts';

/**
 * The sender side of a slot's credit. It opens already holding the advertised C (no CreditUpdate round trip);
 * grants add with saturation at 2^32−1.
 *
 * Hot-path methods answer with a {@link CreditOutcome} string and never allocate; a failed spend changes nothing.
 */
export class SenderLedger {
  #data: number;
  /** The most data credit ever held at once (the initial C until a grant lifts it). */
  #peak: number;
  #terminalSpent = false;

  /**
   * @param initialCredit - the advertised C, 0..2^32−1. A ledger may hold 0 data credit; it can still send control
   *   records and its terminal.
   */
  constructor(initialCredit: number) {
    assertCount(initialCredit, 'initial credit');
    if (initialCredit > MAX_CREDIT) {
      throw new CreditError('ERR_INVALID_ARGUMENT', `initial credit ${String(initialCredit)} exceeds 2^32-1`);
    }
    this.#data = initialCredit;
    this.#peak = initialCredit;
  }

  /**
   * The most data credit held at once. Above the initial C only if the receiver grew the window
   * (docs/protocol.md §10.7.1): its grants then no longer mean only records consumed.
   */
  get peak(): number {
    return this.#peak;
  }

  /** Data records that may be sent now. */
  get dataAvailable(): number {
    return this.#data;
  }

  /** Whether the terminal reserve is still unspent. */
  get terminalAvailable(): boolean {
    return !this.#terminalSpent;
  }

  /** Whether a record of class `cls` could be spent now, without spending it. */
  canSpend(cls: CreditClass): boolean {
    if (cls === CreditClass.Data) return this.#data > 0;
    if (cls === CreditClass.Terminal) return !this.#terminalSpent;
    return true;
  }

  /** Spends one Data record's credit: `ok`, or `DataExhausted` with nothing changed. */
  spendData(): CreditOutcome {
    if (this.#data === 0) return CreditOutcome.DataExhausted;
    this.#data -= 1;
    return CreditOutcome.Ok;
  }

  /** Spends the terminal reserve: `ok` once, then `TerminalAlreadySpent`. Data credit is not touched. */
  spendTerminal(): CreditOutcome {
    if (this.#terminalSpent) return CreditOutcome.TerminalAlreadySpent;
    this.#terminalSpent = true;
    return CreditOutcome.Ok;
  }

  /** Spends a record of class `cls`. Control records are never blocked and spend nothing. */
  spend(cls: CreditClass): CreditOutcome {
    if (cls === CreditClass.Data) return this.spendData();
    if (cls === CreditClass.Terminal) return this.spendTerminal();
    return CreditOutcome.Ok;
  }

  /**
   * Applies a `CreditUpdate` delta, saturating at 2^32−1 (never wrapping).
   *
   * @param delta - the grant, a safe natural number (a u32 on the wire).
   * @returns the data credit now available.
   */
  grant(delta: number): number {
    assertCount(delta, 'grant');
    const sum = this.#data + delta;
    const data = sum > MAX_CREDIT ? MAX_CREDIT : sum;
    this.#data = data;
    if (data > this.#peak) this.#peak = data;
    return data;
  }
}
