/**
 * vitest setup: the property tests (fast-check) run one fixed seed under CI, so a red CI run is the
 * same run on every machine and every retry; elsewhere each run draws a new seed and explores new
 * inputs. FC_SEED=<n> picks a seed anywhere (a failing property prints the seed that broke it).
 */
import fc from 'fast-check';

const CI_SEED = 20_261_207;
const env = process.env['FC_SEED'];
const seed = env !== undefined && env !== '' ? Number(env) : process.env['CI'] ? CI_SEED : undefined;
if (seed !== undefined) {
  if (!Number.isInteger(seed)) throw new Error(`FC_SEED must be an integer, got ${env}`);
  fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });
}
