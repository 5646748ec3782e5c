/**
 * The closed credit system: a sender Gate opened with Ws; `c` chunks and the multiset Q of grants
 * in flight; a receiver Window opened with Wr; `b` chunks arrived but not consumed. Built from the runtime Gate and
 * Window, so exploring it checks the objects lanemux ships, not a re-implementation.
 */
import { Gate, Window } from '../../src/credit/index.ts';

/** When the receiver may flush. */
export type FlushPolicy =
  /** At any time: the most permissive receiver; its reachable states include every other policy's. */
  | 'any'
  /** Never: only `consume` grants (at the batch threshold). */
  | 'never'
  /** Flush-before-block: the receiver flushes when it is about to block on an empty input (b = 0, pending > 0). */
  | 'before-block';

export interface SystemState {
  readonly ws: number;
  readonly wr: number;
  readonly gate: Gate;
  readonly c: number;
  /** Grants in flight, sorted ascending (a multiset). */
  readonly q: readonly number[];
  readonly win: Window;
  readonly b: number;
  readonly sent: number;
}

export type Step =
  | { readonly kind: 'send' }
  | { readonly kind: 'arrive' }
  | { readonly kind: 'consume' }
  | { readonly kind: 'flush' }
  | { readonly kind: 'deliver'; readonly grant: number };

export function initial(ws: number, wr: number): SystemState {
  return { ws, wr, gate: new Gate(ws), c: 0, q: [], win: new Window(wr), b: 0, sent: 0 };
}

export function key(s: SystemState): string {
  return `${s.gate.available}|${s.c}|${s.q.join(',')}|${s.win.remaining}|${s.win.pending}|${s.b}|${s.sent}`;
}

function addGrant(q: readonly number[], grant: number): readonly number[] {
  if (grant === 0) return q; // a zero grant sends no CreditUpdate
  return [...q, grant].sort((x, y) => x - y);
}

/** Steps enabled in `s` for a sender that wants to send up to `maxSent` chunks. */
export function enabled(s: SystemState, policy: FlushPolicy, maxSent: number): Step[] {
  const steps: Step[] = [];
  if (s.sent < maxSent && s.gate.clone().acquire(1) === 'acquired') steps.push({ kind: 'send' });
  if (s.c > 0) steps.push({ kind: 'arrive' });
  if (s.b > 0) steps.push({ kind: 'consume' });
  const canFlush = s.win.pending > 0 && (policy === 'any' || (policy === 'before-block' && s.b === 0));
  if (canFlush) steps.push({ kind: 'flush' });
  let last = -1;
  for (const grant of s.q) {
    if (grant !== last) steps.push({ kind: 'deliver', grant });
    last = grant;
  }
  return steps;
}

/** Applies a step. `violation` is true when an arriving chunk overran the receiver's window. */
export function apply(s: SystemState, step: Step): { next: SystemState; violation: boolean } {
  const gate = s.gate.clone();
  const win = s.win.clone();
  switch (step.kind) {
    case 'send': {
      if (gate.acquire(1) !== 'acquired') throw new Error('send without credit');
      return { next: { ...s, gate, win, c: s.c + 1, sent: s.sent + 1 }, violation: false };
    }
    case 'arrive': {
      if (win.arrive() === 'violation') return { next: { ...s, gate, win }, violation: true };
      return { next: { ...s, gate, win, c: s.c - 1, b: s.b + 1 }, violation: false };
    }
    case 'consume': {
      const grant = win.consume();
      return { next: { ...s, gate, win, b: s.b - 1, q: addGrant(s.q, grant) }, violation: false };
    }
    case 'flush': {
      const grant = win.flush();
      return { next: { ...s, gate, win, q: addGrant(s.q, grant) }, violation: false };
    }
    case 'deliver': {
      const at = s.q.indexOf(step.grant);
      if (at < 0) throw new Error('no such grant in flight');
      gate.grant(step.grant);
      return { next: { ...s, gate, win, q: [...s.q.slice(0, at), ...s.q.slice(at + 1)] }, violation: false };
    }
  }
}

const sum = (xs: readonly number[]): number => xs.reduce((a, x) => a + x, 0);

/** Checks properties 1–4 of the closed system in `s`; returns the broken ones (empty when all hold). */
export function brokenProperties(s: SystemState): string[] {
  const broken: string[] = [];
  const inFlight = s.c + sum(s.q);
  // 1. conserved (the gate is open throughout the exploration).
  if (s.gate.available + inFlight !== s.win.remaining - (s.wr - s.ws)) broken.push('conserved');
  if (s.gate.available + inFlight + s.b + s.win.pending !== s.ws) broken.push('conserved (with buffer)');
  // 2. never_overruns: a chunk in flight always finds room.
  if (s.c >= 1 && s.win.remaining < 1) broken.push('never_overruns');
  // 3. buffer_bounded.
  if (s.win.remaining + s.b + s.win.pending !== s.wr || s.b > s.wr) broken.push('buffer_bounded');
  // 4. blocked_sender_is_waited_for.
  if (s.gate.closed === null && s.gate.clone().acquire(1) === 'wait') {
    if (inFlight + s.b + s.win.pending !== s.ws || s.ws < 1) broken.push('blocked_sender_is_waited_for');
    if (inFlight === 0 && s.b === 0 && (s.win.pending < 1 || s.win.clone().flush() < 1)) {
      broken.push('blocked_sender_is_waited_for (flush yields a grant)');
    }
  }
  return broken;
}

/** A state where the sender still has chunks to send and no step is enabled. */
export function isDeadlock(s: SystemState, policy: FlushPolicy, maxSent: number): boolean {
  return s.sent < maxSent && enabled(s, policy, maxSent).length === 0;
}

export interface Exploration {
  readonly states: number;
  readonly violations: number;
  readonly broken: ReadonlyArray<{ state: string; properties: string[] }>;
  readonly deadlocks: readonly SystemState[];
  /** Whether the state "all chunks sent, consumed and credit returned" was reached. */
  readonly completed: boolean;
}

/** Breadth-first exploration of every state reachable from `initial(ws, wr)`. */
export function explore(ws: number, wr: number, policy: FlushPolicy, maxSent = 12): Exploration {
  const start = initial(ws, wr);
  const seen = new Set<string>([key(start)]);
  const queue: SystemState[] = [start];
  const broken: Array<{ state: string; properties: string[] }> = [];
  const deadlocks: SystemState[] = [];
  let violations = 0;
  let completed = false;
  for (let head = 0; head < queue.length; head++) {
    const s = queue[head] as SystemState;
    const props = brokenProperties(s);
    if (props.length > 0) broken.push({ state: key(s), properties: props });
    if (isDeadlock(s, policy, maxSent)) deadlocks.push(s);
    if (s.sent === maxSent && s.c === 0 && s.b === 0 && s.q.length === 0) completed = true;
    for (const step of enabled(s, policy, maxSent)) {
      const { next, violation } = apply(s, step);
      if (violation) violations += 1;
      const k = key(next);
      if (!seen.has(k)) {
        seen.add(k);
        queue.push(next);
      }
    }
  }
  return { states: queue.length, violations, broken, deadlocks, completed };
}
