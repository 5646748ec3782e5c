// A refused createClient / createNode option is explained by zod, the validator of record, loaded only
// then (schema.ts `explain`, a dynamic import): here zod/mini is wrapped so that what it says is marked,
// and the ConfigError carries zod's marked messages; well-formed options never load it.
import { describe, expect, it, vi } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createClient } from '../../src/index.ts';
import { createNode } from '../../src/stream/node.ts';

const loads = vi.hoisted(() => ({ count: 0 }));

vi.mock('zod/mini', async (importOriginal) => {
  const zm = await importOriginal<typeof import('zod/mini')>();
  loads.count++;
  return {
    ...zm,
    // The options schemas are strict objects: mark every issue zod lists for them.
    strictObject: (...args: Parameters<typeof zm.strictObject>) => {
      const schema = zm.strictObject(...args);
      const safeParse = schema.safeParse.bind(schema);
      return Object.assign(schema, {
        safeParse: (input: unknown, params?: Parameters<typeof safeParse>[1]) => {
          const r = safeParse(input, params);
          if (!r.success)
            for (const issue of r.error.issues) (issue as { message: string }).message = `zod: ${issue.message}`;
          return r;
        },
      });
    },
  };
});

const transports = () => [memoryTransport({ network: createMemoryNetwork(), listen: false })];

describe('options refused by a reader are explained by zod', () => {
  it('well-formed options never load zod', async () => {
    const client = await createClient({ transports: transports(), lanes: 2 });
    const node = await createNode({ transports: transports(), lanes: 2 });
    await Promise.all([client.close(), node.close()]);
    expect(loads.count).toBe(0);
  });

  it("createClient's ConfigError lists zod's issues, every bad field named", async () => {
    const error = await createClient({ transports: transports(), lanes: 0, bogus: 1 } as never).catch((e) => e);
    expect(error).toMatchObject({ code: 'ERR_INVALID_CONFIG', fields: ['lanes', 'bogus'] });
    expect(error.message).toMatch(/✖ zod: Too small: expected number to be >=1\n {2}→ at lanes/);
    expect(error.message).toMatch(/✖ zod: Unrecognized key: "bogus"/);
    expect(loads.count).toBe(1);
  });

  it("createNode's ConfigError lists zod's issues beside the mux config's own", async () => {
    const error = await createNode({
      transports: transports(),
      unattachedTimeout: -1,
      mux: { initialCredit: -1 },
    }).catch((e) => e);
    expect(error).toMatchObject({ code: 'ERR_INVALID_CONFIG', fields: ['unattachedTimeout', 'mux.initialCredit'] });
    expect(error.message).toMatch(/✖ zod: Too small: expected number to be >0\n {2}→ at unattachedTimeout/);
    expect(error.message).toMatch(/→ at mux\.initialCredit/);
  });
});
