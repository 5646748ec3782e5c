#!/usr/bin/env node
// `npm start`: a decode-engine simulation on loopback TCP.
//
// One engine node holds up to --max-batch requests in decode and emits one token per request per
// forward pass, every --pass-ms ms. Requests are spread over --frontends frontend nodes, each of
// which consumes every token of its requests. The same workload runs once per mode — legacy
// per-stream TCP, mux Auto, mux Manual — and the demo ends with one table per mode.
import { parseArgs } from 'node:util';
import { runDecodeSim } from '../bench/decode-sim.mjs';

const HELP = `usage: npm start -- [options]

Simulates an LLM decode engine streaming tokens to frontends over loopback TCP, once per mode, and
prints one table row per mode: how many writes carried the tokens, latency and CPU per token.

  --requests N     requests (streams) to serve                          default 256
  --frontends N    frontend nodes the requests are spread over          default 4
  --tokens N       tokens per request                                   default 128
  --max-batch N    requests the engine decodes at once                  default: all of them
  --pass-ms MS     time between forward passes (0: back to back)        default 2
  --credit N       tokens a stream may have in flight unread            default 32
  --lanes N        ordered lanes per peer (1..16)                       default 1
  --modes LIST     any of legacy,auto,manual                            default legacy,auto,manual
                     legacy  one TCP connection per request (no multiplexer)
                     auto    lanemux, batches written when the engine yields (no code change)
                     manual  lanemux, one batch per frontend per pass (engine calls flushBatch())
  --yield-sends    yield to the event loop after every send (a sampler that does I/O): Auto
                   then writes what it finds at each wake, Manual still one batch per pass
  --json           print the results as JSON only
  --quiet          no progress lines
  --help           this text`;

let opt;
try {
  ({ values: opt } = parseArgs({
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
  }));
} catch (e) {
  // parseArgs throws for an unknown flag, a missing value or a stray argument: one line, no stack.
  fail(`${e instanceof Error ? e.message.split('\n')[0] : String(e)} (see: npm start -- --help)`);
}
if (opt.help) {
  console.log(HELP);
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
  quiet: opt.quiet,
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
/**
 * Progress lines: on a terminal one line rewritten in place (`\r`); otherwise (a pipe, a CI log)
 * each progress line on its own line, at most one a second, and no blanking line.
 */
function progressWriter(out) {
  if (out.isTTY) return (text) => out.write(text);
  let last = 0;
  return (text) => {
    const line = text.replace(/\r$/, '').trimEnd();
    if (line === '' || Date.now() - last < 1000) return;
    last = Date.now();
    out.write(`${line}\n`);
  };
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
const log = cfg.quiet || opt.json ? null : progressWriter(process.stdout);
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
  const legacy = results.find((r) => r.mode === 'legacy');
  const best = results.filter((r) => r.mode !== 'legacy').sort((x, y) => x.writes - y.writes)[0];
  console.log(`
What the columns mean:
  data writes    writes to the network that carried tokens: one per token on the per-stream path,
                 one per batch (many streams' tokens together) with lanemux
  open writes    writes that opened a stream (lanemux sends one when the engine attaches a request)
  tokens/write   tokens carried per data write: higher means fewer system calls and packets
  latency        from the engine's send to the frontend reading the token
  CPU µs/token   user+system CPU of this one process (engine and frontends share it) per token`);
  if (legacy !== undefined && best !== undefined && best.writes > 0)
    console.log(
      `\n${label[best.mode]} carried the same ${best.tokens.toLocaleString()} tokens in ${(legacy.writes / best.writes).toFixed(1)}x fewer writes than one connection per request.`,
    );
  console.log(
    bad.length === 0
      ? "Checks: no token overran its reader's buffer (reader_stall_total = 0), no credit was lost " +
          '(credit_lost_total = 0), and every stream released its slot (live slots back to 0) in every mode.'
      : `CHECK FAILED (reader stalls, lost credit or slots left open): ${JSON.stringify(bad)}`,
  );
  if (bad.length !== 0) process.exitCode = 1;
}
