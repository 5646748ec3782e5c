// README's "Using it" snippet runs as printed: the first TypeScript block of that section, with its
// imports pointed at the sources, `process.stdout.write` collected, and both nodes closed afterwards.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHECKOUT, scratchDir } from '../support/scratch.ts';

function snippet(): string {
  const readme = readFileSync(join(CHECKOUT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Using it\n'));
  const m = /```ts\n([\s\S]*?)```/.exec(section);
  if (m === null) throw new Error('README has no ```ts block under "## Using it"');
  return m[1]!;
}

describe('README quick start', () => {
  it('the "Using it" snippet serves a method and streams its answer over TCP', async () => {
    const code = snippet();
    expect(code).toContain('.serve(');
    expect(code).toContain('.stream<string>(');
    const src = join(CHECKOUT, 'src');
    const runnable = `${code
      .replace("from 'lanemux';", `from '${join(src, 'index.ts')}';`)
      .replace("from 'lanemux/transport/tcp';", `from '${join(src, 'adapters', 'node-tcp.ts')}';`)
      .replaceAll('process.stdout.write(', 'out.push(')}
await engine.close();
await frontend.close();
`;
    const dir = scratchDir('readme-');
    try {
      const file = join(dir, 'using-it.ts');
      writeFileSync(file, `export const out: string[] = [];\n${runnable}`);
      const mod = (await import(/* @vite-ignore */ file)) as { out: string[] };
      expect(mod.out.join('')).toBe('Hello, world');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
