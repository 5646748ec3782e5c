// README's four-chat app is the example that runs (examples/node-ws-chat, run in Chromium by examples.test.ts):
// the same code line for line, but for the fixed port and URL the example reads from its environment, and the
// line counts README states.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHECKOUT } from '../support/scratch.ts';

const code = (text: string): string[] =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('//'))
    .map((l) => l.replace(/\s+\/\/\s.*$/, ''));

function readmeBlock(): { server: string[]; page: string[]; claim: string } {
  const readme = readFileSync(join(CHECKOUT, 'README.md'), 'utf8');
  const at = readme.indexOf('A browser page streaming four chats');
  expect(at).toBeGreaterThan(0);
  const m = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (m === null) throw new Error('no ```ts block after the four-chat paragraph');
  const [server, page] = m[1]!.split('\n// main.ts');
  // The page's part starts on its heading comment's line: drop that line's rest.
  return { server: code(server!), page: code(page!.slice(page!.indexOf('\n'))), claim: readme.slice(at, at + 200) };
}

describe("README's four-chat app", () => {
  it('is the running example, line for line, and as short as README says', () => {
    const { server, page, claim } = readmeBlock();
    const dir = join(CHECKOUT, 'examples', 'node-ws-chat');
    const exServer = code(readFileSync(join(dir, 'server.mjs'), 'utf8'));
    const exPage = code(readFileSync(join(dir, 'main.ts'), 'utf8'));
    // The example takes its port and its server's URL from outside; README fixes them.
    const fixed = (l: string): string =>
      l
        .replace('Number(process.env.PORT ?? 8080)', '8080')
        .replace(/^const server = .*$/, '')
        .replace('connect(server)', "connect('ws://127.0.0.1:8080/lanemux')");
    expect(server).toEqual(exServer.map(fixed).filter((l) => l !== ''));
    expect(page).toEqual(exPage.map(fixed).filter((l) => l !== ''));
    expect(claim).toContain(`${server.length} + ${page.length} lines of code`);
  });
});
