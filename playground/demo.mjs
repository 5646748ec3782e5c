#!/usr/bin/env node
// `npm start`: a decode-engine simulation on loopback TCP.
//
// One engine node holds up to --max-batch requests in decode and emits one token per request per
// forward pass, every --pass-ms ms. Requests are spread over --frontends frontend nodes, each of
// which consumes every token of its requests. The same workload runs once per mode — legacy
// per-stream TCP, mux Auto, mux Manual — and the demo ends with one table per mode.
import { parseArgs } from 'node:util';
import { runDecodeSim } from '../bench/decode-sim.mjs';

const { values: opt } = parseArgs({
  options: {
    requests: { type: 'string', default: '256' },
    frontends: { type: 'string', default: '4' },
    'pass-ms': { type: 'string', default: '2' },
    tokens: { type: 'string', default: '128' },
    'max-batch': { type: 'string' },
    credit: { type: 'string', default: '32' },
    lanes: { type: 'string', default: '1' },
    modes: { type: 'string', default: 'legacy,auto,manual' },
    json: { type: 'boolean', default: false },
    'yield-sends': { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (opt.help) {
  console.log(`usage: npm start -- [--requests 256] [--frontends 4] [--pass-ms 2] [--tokens 128]
                  [--max-batch N] [--credit 32] [--lanes 1] [--modes legacy,auto,manual] [--json]
  --pass-ms 0 runs passes back to back (yielding to the event loop between passes).
  --yield-sends yields to the event loop after every send (a producer whose sampling step does I/O):
  Auto then writes what it finds at each wake, Manual still writes one batch per peer per pass.`);
  process.exit(0);
}
const cfg = {
  requests: int(opt.requests, 1, 100_000, 'requests'),
  frontends: int(opt.frontends, 1, 64, 'frontends'),
  passMs: num(opt['pass-ms'], 0, 10_000, 'pass-ms'),
  tokens: int(opt.tokens, 1, 100_000, 'tokens'),
  credit: int(opt.credit, 1, 65_536, 'credit'),
  lanes: int(opt.lanes, 1, 16, 'lanes'),
  modes: opt.modes
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean),
  yieldSends: opt['yield-sends'],
};
cfg.maxBatch = opt['max-batch'] === undefined ? cfg.requests : int(opt['max-batch'], 1, 100_000, 'max-batch');
for (const m of cfg.modes) if (!['legacy', 'auto', 'manual'].includes(m)) fail(`unknown mode ${m}`);

function int(v, min, max, name) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer in ${min}..${max}`);
  return n;
}
function num(v, min, max, name) {
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) fail(`--${name} must be a number in ${min}..${max}`);
  return n;
}
function fail(msg) {
  console.error(`demo: ${msg}`);
  process.exit(2);
}

const results = [];
if (!opt.json) {
  console.log(
    `lanemux demo: ${cfg.requests} requests x ${cfg.tokens} tokens, ${cfg.frontends} frontends, max batch ${cfg.maxBatch}, ` +
      `pass every ${cfg.passMs} ms, credit ${cfg.credit}, ${cfg.lanes} lane(s)${cfg.yieldSends ? ', yielding after every send' : ''}, loopback TCP`,
  );
}
const log = !cfg.quiet && !opt.json ? (text) => process.stdout.write(text) : null;
for (const mode of cfg.modes) results.push(await runDecodeSim(cfg, mode, log));

if (opt.json) {
  console.log(JSON.stringify({ config: cfg, results }, null, 2));
} else {
  const label = { legacy: 'legacy per-stream', auto: 'mux Auto', manual: 'mux Manual' };
  const rows = results.map((r) => [
    label[r.mode],
    r.tokens.toLocaleString(),
    r.writes.toLocaleString(),
    r.openWrites.toLocaleString(),
    r.tokensPerWrite.toFixed(2),
    `${r.p50.toFixed(2)} / ${r.p99.toFixed(2)}`,
    r.cpuUsPerToken.toFixed(2),
    r.seconds.toFixed(2),
  ]);
  const head = [
    'mode',
    'tokens',
    'data writes',
    'open writes',
    'tokens/write',
    'latency p50 / p99 ms',
    'CPU µs/token',
    'wall s',
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => '| ' + cells.map((c, i) => c.padEnd(widths[i])).join(' | ') + ' |';
  console.log('\n' + line(head));
  console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  for (const r of rows) console.log(line(r));
  const bad = results.filter((r) => r.readerStall !== 0 || r.creditLost !== 0 || r.liveSlotsAfter !== 0);
  console.log(
    bad.length === 0
      ? '\ninvariants: reader_stall_total = 0, credit_lost_total = 0, live_slots back to 0 in every mode'
      : `\nINVARIANT BROKEN: ${JSON.stringify(bad)}`,
  );
  console.log(
    "CPU is user+system of this one process (engine and frontends share it); data writes are the engine's writes that carried tokens (mux batches, or one write per frame on the per-stream path, terminals included); open writes are the mux's OpenSlot batches (one per stream, written at attach).",
  );
}
