// Module hooks that let a child Node 20 process import the repo's TypeScript sources directly
// (Node 20 cannot strip types): each `.ts` file outside node_modules is transpiled on load with the
// repo's own TypeScript. Only for tests that must observe a fresh process (exit code, what keeps it
// alive); register with `node --import ./test/support/ts-register.mjs`.
import { readFile } from 'node:fs/promises';
import ts from 'typescript';

const compilerOptions = {
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ES2022,
  verbatimModuleSyntax: true,
  sourceMap: false,
};

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts') || url.includes('/node_modules/')) return nextLoad(url, context);
  const source = await readFile(new URL(url), 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: url });
  return { format: 'module', source: outputText, shortCircuit: true };
}
