// createNode reports every configuration mistake with one error class and code: a ConfigError
// (`ERR_INVALID_CONFIG`) naming each bad field, whether the field belongs to the node, to the
// messenger it builds or to the mux.
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, createNode, isLanemuxError, type LanemuxNode } from '../../src/index.ts';
import { ConfigError as ConfigErrorFromErrors } from '../../src/errors.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import { isTransportCode } from '../../src/transport/errors.ts';
import { memoryTransport, createMemoryNetwork } from '../../src/adapters/memory.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

const network = createMemoryNetwork();
const transports = () => [memoryTransport({ network, listen: false })];

/** The error `createNode(options)` rejects with (fails the test if it resolves). */
async function refusal(options: unknown): Promise<ConfigError> {
  let node: LanemuxNode | undefined;
  try {
    node = await createNode(options as never);
  } catch (e) {
    return e as ConfigError;
  }
  nodes.push(node);
  throw new Error(`createNode accepted options with keys ${Object.keys(options as object).join(', ')}`);
}

describe('createNode configuration errors', () => {
  it('a bad messenger option (lanes: 99) and a bad mux field are the same ConfigError, ERR_INVALID_CONFIG, naming the field', async () => {
    const lanes = await refusal({ transports: transports(), lanes: 99 });
    expect(lanes).toBeInstanceOf(ConfigError);
    expect(lanes).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'lanes' });
    expect(lanes.message).toContain('lanes');
    const mux = await refusal({ transports: transports(), mux: { initialCredit: -1 } });
    expect(mux).toBeInstanceOf(ConfigError);
    expect(mux).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'mux.initialCredit' });
    // One class, exported from the error module and from the package root.
    expect(ConfigError).toBe(ConfigErrorFromErrors);
    expect(isLanemuxError(lanes, 'ERR_INVALID_CONFIG')).toBe(true);
  });

  it('the old transport code ERR_CONFIG is gone from the transport codes', () => {
    expect(isTransportCode('ERR_CONFIG')).toBe(false);
  });

  it('unattachedTimeout must be a finite number above 0: -5, 0, NaN and Infinity are refused naming it', async () => {
    for (const unattachedTimeout of [-5, 0, Number.NaN, Number.POSITIVE_INFINITY, '100']) {
      const e = await refusal({ transports: transports(), unattachedTimeout });
      expect(e, String(unattachedTimeout)).toBeInstanceOf(ConfigError);
      expect(e.field).toBe('unattachedTimeout');
    }
    const ok = await createNode({ transports: transports(), unattachedTimeout: 250 });
    nodes.push(ok);
  });

  it('every bad field is named in one error, node and mux fields alike', async () => {
    const e = await refusal({
      transports: transports(),
      lanes: 0,
      maxMessageSize: 10,
      unattachedTimeout: -1,
      workerId: -1n,
      mux: { maxBatchBytes: 1 },
    });
    expect(e).toBeInstanceOf(ConfigError);
    expect([...e.fields].sort()).toEqual([
      'lanes',
      'maxMessageSize',
      'mux.maxBatchBytes',
      'unattachedTimeout',
      'workerId',
    ]);
    for (const f of e.fields) expect(e.message).toContain(f.replace(/^mux\./, ''));
  });

  it('refuses options of the wrong type: transports, authenticate, credential, perStream, metrics, runtime, messenger', async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['transports', { transports: [{}] }],
      ['authenticate', { transports: transports(), authenticate: 'yes' }],
      ['credential', { transports: transports(), credential: 42 }],
      ['perStream', { transports: transports(), perStream: { key: 'tcp-stream' } }],
      ['metrics', { transports: transports(), metrics: {} }],
      ['runtime', { transports: transports(), runtime: { now: () => 0 } }],
      ['messenger', { messenger: { self: {} } }],
    ];
    for (const [field, options] of cases) {
      const e = await refusal(options);
      expect(e, field).toBeInstanceOf(ConfigError);
      // The field, or an element of it (`transports.0`).
      expect(
        e.fields.some((f) => f === field || f.startsWith(`${field}.`)),
        `${field}: ${e.fields.join(', ')}`,
      ).toBe(true);
    }
  });

  it('refuses an unknown option (a typo is not silently ignored)', async () => {
    const e = await refusal({ transports: transports(), unattachedTimout: 5 });
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.fields).toEqual(['unattachedTimout']);
  });

  it('without a messenger it needs at least one transport', async () => {
    expect(await refusal({})).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'transports' });
    expect(await refusal({ transports: [] })).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'transports' });
  });

  it('options that only shape a messenger the node builds are refused alongside a messenger given ready-made', async () => {
    const [a] = LoopMessenger.pair();
    const e = await refusal({ messenger: a, lanes: 4, transports: transports() });
    expect(e).toBeInstanceOf(ConfigError);
    expect([...e.fields].sort()).toEqual(['lanes', 'transports']);
    expect(e.message).toContain('messenger');
  });

  it('a messenger that does not advertise the mux key in its HELLO is refused while the mux is on', async () => {
    const m = await createMessenger({ transports: transports(), healthCheck: false });
    try {
      const e = await refusal({ messenger: m });
      expect(e).toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'messenger' });
      expect(e.message).toContain('messenger-mux-v2');
      // With the mux off the messenger is fine as it is.
      const node = await createNode({ messenger: m, mux: { enabled: false } });
      nodes.push(node);
      expect(node.muxEnabled).toBe(false);
    } finally {
      await m.close();
    }
  });
});
