/**
 * The grant that is due (`ReceiverAccount.takeDueGrant`, docs/protocol.md §10.7): credit returns once the sender may
 * hold no more than half its window, as the receiver counts it — fewer CreditUpdates, and never a stalled sender.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CreditClass, ReceiverAccount, SenderLedger } from '../../src/credit/index.ts';

describe('the grant that is due', () => {
  it('a stream read as fast as it arrives returns its credit in grants of C/2, not one per record', () => {
    const account = new ReceiverAccount(32);
    const grants: number[] = [];
    for (let i = 0; i < 64; i++) {
      expect(account.admit(CreditClass.Data)).toBe('ok');
      account.release(1, 64);
      const g = account.takeDueGrant();
      if (g > 0) grants.push(g);
    }
    expect(grants).toEqual([16, 16, 16, 16]);
  });

  it('records the consumer has not taken count as held by the sender: the grant of what was taken comes early', () => {
    const account = new ReceiverAccount(8);
    for (let i = 0; i < 4; i++) account.admit(CreditClass.Data);
    account.release(1);
    // 4 buffered + 1 taken: the sender may hold 3 ≤ 4, so the one taken goes back now.
    expect(account.takeDueGrant()).toBe(1);
  });

  it('nothing taken, nothing due; a full buffer of bytes withholds it as takeGrant does', () => {
    const account = new ReceiverAccount(4, { watermark: 10 });
    expect(account.takeDueGrant()).toBe(0);
    for (let i = 0; i < 4; i++) account.admit(CreditClass.Data);
    account.addBuffered(40);
    account.release(2, 20);
    expect(account.takeDueGrant()).toBe(0); // 20 bytes still buffered ≥ 10
    account.release(2, 20);
    expect(account.takeDueGrant()).toBe(4);
  });

  it('with C = 1 every record taken is due at once', () => {
    const account = new ReceiverAccount(1);
    account.admit(CreditClass.Data);
    account.release(1);
    expect(account.takeDueGrant()).toBe(1);
  });

  it('whatever the interleaving, once the link and the consumer are idle the sender holds more than half its window (property)', () => {
    const op = fc.constantFrom('send', 'deliver', 'consume', 'grant');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.array(op, { maxLength: 400 }), (c, ops) => {
        const ledger = new SenderLedger(c);
        const account = new ReceiverAccount(c);
        let inFlight = 0;
        let buffered = 0;
        const grants: number[] = [];
        // The receiver reconciles after every arrival and every take, as the ingress does.
        const reconcile = (): void => {
          const g = account.takeDueGrant();
          if (g > 0) grants.push(g);
        };
        const step = (o: string): void => {
          if (o === 'send') {
            if (ledger.spend(CreditClass.Data) === 'ok') inFlight++;
          } else if (o === 'deliver') {
            if (inFlight > 0) {
              inFlight--;
              expect(account.admit(CreditClass.Data)).toBe('ok');
              buffered++;
              reconcile();
            }
          } else if (o === 'consume') {
            if (buffered > 0) {
              buffered--;
              account.release(1);
              reconcile();
            }
          } else {
            const g = grants.shift();
            if (g !== undefined) ledger.grant(g);
          }
          // The receiver's count is exact: the sender's credit, its records in flight, and grants not yet landed.
          expect(account.remaining).toBe(ledger.dataAvailable + inFlight + grants.reduce((a, g) => a + g, 0));
        };
        for (const o of ops) step(o);
        // Let everything settle: deliver, consume, and land every grant.
        while (inFlight > 0 || buffered > 0 || grants.length > 0) {
          step('deliver');
          step('consume');
          step('grant');
        }
        expect(ledger.dataAvailable).toBeGreaterThan(c >>> 1);
      }),
      { numRuns: 500 },
    );
  });
});
