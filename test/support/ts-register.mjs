// `node --import ./test/support/ts-register.mjs …`: load the repo's `.ts` sources (see ts-hooks.mjs).
import { register } from 'node:module';

register('./ts-hooks.mjs', import.meta.url);
