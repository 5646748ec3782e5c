/**
 * Replays conformance scripts (the schema of conformance.json) against lanemux's runtime objects.
 *
 * Runner rules: zip `ops` with `steps` and stop a script at its first disagreement; collect failures across all
 * scripts; fail once with "N of M scripts disagree; first: …"; every section must be non-empty.
 */
import { Acquire, CreditGate, CreditRouter, Gate, Window, negotiateInitialCredit } from '../../src/credit/index.ts';
import type { StreamKey } from '../../src/credit/index.ts';

export type GateOp = { op: 'acquire'; n: number } | { op: 'grant'; n: number } | { op: 'close'; reason: string };
export interface GateStep {
  answer: string | null;
  available: number;
  closed: string | null;
}
export interface GateScript {
  name?: string;
  window: number;
  ops: GateOp[];
  steps: GateStep[];
}
export type WindowOp = 'arrive' | 'continuation' | 'consume' | 'flush';
export interface WindowStep {
  violation: boolean;
  grant: number;
  remaining: number;
  pending: number;
}
export interface WindowScript {
  name?: string;
  window: number;
  ops: WindowOp[];
  steps: WindowStep[];
}
export interface NegotiateScript {
  ours: number;
  theirs: number;
  window: number | null;
}
export interface GrantTargetScript {
  streams: StreamKey[];
  named: StreamKey;
  matched: boolean;
  target: StreamKey;
}
export interface ConformanceFile {
  gate: GateScript[];
  window: WindowScript[];
  negotiate: NegotiateScript[];
  grant_target: GrantTargetScript[];
}

/** What the replay found: M scripts run, and one message per disagreeing script. */
export interface ReplayReport {
  total: number;
  failures: string[];
}

/** The non-waiting surface shared by the model Gate and the async CreditGate. */
interface NonWaitingGate {
  readonly available: number;
  readonly closed: string | null;
  acquire(n: number): Acquire;
  grant(n: number): void;
  close(reason: string): void;
}

// The model Gate, and the runtime CreditGate through its non-waiting acquire.
const GATE_IMPLS: ReadonlyArray<{ readonly name: string; readonly make: (window: number) => NonWaitingGate }> = [
  { name: 'Gate', make: (w) => new Gate(w) },
  {
    name: 'CreditGate',
    make: (w) => {
      const g = new CreditGate(w);
      return {
        get available() {
          return g.available;
        },
        get closed() {
          return g.closed;
        },
        acquire: (n) => g.tryAcquire(n),
        grant: (n) => g.grant(n),
        close: (reason) => g.close(reason),
      };
    },
  },
];

function label(section: string, index: number, name: string | undefined): string {
  return `${section}[${index}]${name === undefined ? '' : ` "${name}"`}`;
}

function replayGate(script: GateScript): string | null {
  if (script.ops.length !== script.steps.length) return `ops and steps differ in length`;
  for (const impl of GATE_IMPLS) {
    const gate = impl.make(script.window);
    for (let i = 0; i < script.ops.length; i++) {
      const op = script.ops[i] as GateOp;
      const want = script.steps[i] as GateStep;
      let answer: string | null = null;
      if (op.op === 'acquire') {
        const a = gate.acquire(op.n);
        answer = a === Acquire.Closed ? `closed:${gate.closed ?? ''}` : a;
      } else if (op.op === 'grant') gate.grant(op.n);
      else gate.close(op.reason);
      // The reason is checked only through the acquire answer; `closed` compares as closed-or-not.
      if (
        answer !== want.answer ||
        gate.available !== want.available ||
        (gate.closed !== null) !== (want.closed !== null)
      ) {
        return (
          `${impl.name} step ${i} (${JSON.stringify(op)}): got answer ${String(answer)}, available ${gate.available}, ` +
          `closed ${gate.closed !== null}; want ${String(want.answer)}, ${want.available}, ${want.closed !== null}`
        );
      }
    }
  }
  return null;
}

function replayWindow(script: WindowScript): string | null {
  if (script.ops.length !== script.steps.length) return `ops and steps differ in length`;
  const win = new Window(script.window);
  for (let i = 0; i < script.ops.length; i++) {
    const op = script.ops[i] as WindowOp;
    const want = script.steps[i] as WindowStep;
    let violation = false;
    let grant = 0;
    switch (op) {
      case 'arrive':
        violation = win.arrive() !== 'accepted';
        break;
      case 'continuation':
        violation = win.arrive() !== 'accepted';
        if (!violation) grant = win.continued();
        break;
      case 'consume':
        grant = win.consume();
        break;
      case 'flush':
        grant = win.flush();
        break;
      default:
        return `step ${i}: unknown op ${JSON.stringify(op)}`;
    }
    if (
      violation !== want.violation ||
      grant !== want.grant ||
      win.remaining !== want.remaining ||
      win.pending !== want.pending
    ) {
      return (
        `step ${i} (${op}): got (${violation}, ${grant}, ${win.remaining}, ${win.pending}); ` +
        `want (${want.violation}, ${want.grant}, ${want.remaining}, ${want.pending})`
      );
    }
  }
  return null;
}

function replayNegotiate(script: NegotiateScript): string | null {
  let got: number | null;
  try {
    got = negotiateInitialCredit(script.ours, script.theirs);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.includes('initial_credit')) {
      return `refusal is not an error naming initial_credit: ${String(error)}`;
    }
    got = null;
  }
  return got === script.window
    ? null
    : `negotiate(${script.ours}, ${script.theirs}) = ${String(got)}, want ${String(script.window)}`;
}

function replayGrantTarget(script: GrantTargetScript): string | null {
  const router = new CreditRouter<number>();
  const gates = script.streams.map((stream) => {
    const gate = new CreditGate(0);
    router.register(7, stream, gate);
    return gate;
  });
  const stranger = new CreditGate(0);
  router.register(8, script.named, stranger);
  const matched = router.route(7, script.named, 3);
  if (matched !== script.matched) return `matched ${matched}, want ${script.matched}`;
  const expected = script.matched ? script.streams.indexOf(script.target) : -1;
  if (script.matched && expected < 0)
    return `script names target ${String(script.target)} that is not among its streams`;
  for (let i = 0; i < gates.length; i++) {
    const want = i === expected ? 3 : 0;
    const got = (gates[i] as CreditGate).available;
    if (got !== want) return `gate for stream ${String(script.streams[i])} holds ${got}, want ${want}`;
  }
  if (stranger.available !== 0) return `stranger gate of request 8 holds ${stranger.available}, want 0`;
  return null;
}

/** Replays every section; throws if a section is missing or empty. Never throws for a disagreement. */
export function replay(file: ConformanceFile): ReplayReport {
  const sections = [
    ['gate', file.gate, replayGate],
    ['window', file.window, replayWindow],
    ['negotiate', file.negotiate, replayNegotiate],
    ['grant_target', file.grant_target, replayGrantTarget],
  ] as const;
  const failures: string[] = [];
  let total = 0;
  for (const [section, scripts, run] of sections) {
    if (!Array.isArray(scripts) || scripts.length === 0) throw new Error(`conformance section "${section}" is empty`);
    (scripts as readonly unknown[]).forEach((script, index) => {
      total += 1;
      let failure: string | null;
      try {
        failure = (run as (s: unknown) => string | null)(script);
      } catch (error) {
        failure = `threw ${String(error)}`;
      }
      const name = (script as { name?: string }).name;
      if (failure !== null) failures.push(`${label(section, index, name)}: ${failure}`);
    });
  }
  return { total, failures };
}

/** Replays and fails once, as the runner rules say. */
export function assertConformance(file: ConformanceFile): void {
  const { total, failures } = replay(file);
  if (failures.length > 0) {
    throw new Error(`${failures.length} of ${total} scripts disagree; first: ${failures[0] ?? ''}`);
  }
}
