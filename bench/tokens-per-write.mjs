#!/usr/bin/env node
// Tokens per write in the reference's three decode shapes: 24 requests / max
// batch 8 / 1 ms between passes; 96 / 32 / 1 ms; 24 / 8 / no gap — 3 frontends, credit 256, 20
// tokens per request — for legacy per-stream, mux Auto and mux Manual (one flushBatch() per pass).
// The workload is `npm start`'s decode simulation (decode-sim.mjs), one process. One invocation
// runs every shape × mode once, interleaved; the bench runs it 5 times.
// Usage: node bench/tokens-per-write.mjs [--tokens 20] [--modes legacy,auto,manual]
import { parseArgs, emitAndExit, round } from './harness.mjs';
import { runDecodeSim } from './decode-sim.mjs';

const args = parseArgs();
export const SHAPES = [
  {
    id: '24 req / batch 8 / 1 ms',
    requests: 24,
    maxBatch: 8,
    passMs: 1,
    ref: { legacy: '0.99–1.00', auto: '2.18–2.19', manual: '2.19' },
  },
  {
    id: '96 req / batch 32 / 1 ms',
    requests: 96,
    maxBatch: 32,
    passMs: 1,
    ref: { legacy: 'not run', auto: '4.67–5.14', manual: '5.38' },
  },
  {
    id: '24 req / batch 8 / no gap',
    requests: 24,
    maxBatch: 8,
    passMs: 0,
    ref: { legacy: 'not run', auto: '6.61–7.44', manual: '3.47–4.41' },
  },
];
const modes = (args.modes ?? 'legacy,auto,manual').split(',');
const tokens = Number(args.tokens ?? 20);
const rows = [];
for (const shape of SHAPES) {
  for (const mode of modes) {
    const cfg = {
      requests: shape.requests,
      frontends: 3,
      passMs: shape.passMs,
      tokens,
      maxBatch: shape.maxBatch,
      credit: 256,
      lanes: 1,
      yieldSends: false,
    };
    const r = await runDecodeSim(cfg, mode, null);
    rows.push({
      shape: shape.id,
      mode,
      tokens: r.tokens,
      writes: r.writes,
      tokens_per_write: round(r.tokensPerWrite, 3),
      cpu_us_per_token: round(r.cpuUsPerToken, 2),
    });
  }
}
await emitAndExit({ bench: 'tokens-per-write', tokens_per_request: tokens, rows });
