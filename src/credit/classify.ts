/**
 * Credit class of a record (docs/protocol.md §10.2: control records never spend credit).
 */
import { CreditError } from './errors.ts';
import { RecordType } from '../wire/constants.ts';

/** How a record counts against credit. */
export const CreditClass = {
  /** OpenSlot, CloseSlot, CreditUpdate, LifecycleSlot: never credited, never in the slot buffer. */
  Control: 'Control',
  /** A Data record whose body is a terminal sentinel: spends the slot's one terminal reserve. */
  Terminal: 'Terminal',
  /** Any other Data record, and SlotHeartbeat: spends one data credit. */
  Data: 'Data',
} as const;
/** How a record counts against credit. */
export type CreditClass = (typeof CreditClass)[keyof typeof CreditClass];

/**
 * Classifies a record for credit.
 *
 * @param recordType - the wire `record_type` (0..5).
 * @param terminal - whether a Data body passes the terminal sentinel check (the wire module owns that check).
 *   Ignored for other record types.
 * @throws {@link CreditError} `ERR_INVALID_ARGUMENT` for an unknown record type (the decoder refuses those first).
 */
export function classify(recordType: number, terminal: boolean): CreditClass {
  switch (recordType) {
    case RecordType.Data:
      return terminal ? CreditClass.Terminal : CreditClass.Data;
    case RecordType.SlotHeartbeat:
      // Delivered as the Heartbeat frame: Data class, it spends credit (docs/protocol.md §10.2).
      return CreditClass.Data;
    case RecordType.OpenSlot:
    case RecordType.CloseSlot:
    case RecordType.CreditUpdate:
    case RecordType.LifecycleSlot:
      return CreditClass.Control;
    default:
      throw new CreditError('ERR_INVALID_ARGUMENT', `unknown record type ${String(recordType)}`);
  }
}

/** Whether a record of this class occupies the slot buffer: Data and Terminal do, Control never does. */
export function occupiesBuffer(cls: CreditClass): boolean {
  return cls !== CreditClass.Control;
}
