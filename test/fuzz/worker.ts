/**
 * The fuzz loop in a worker thread (started by cli.ts): before each input it publishes the input's
 * index, target and bytes in shared memory, so the main thread can name the input of a decode that
 * never returns.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { runFuzz } from './harness.ts';
import { selectTargets } from './targets.ts';

interface Job {
  readonly seed: number;
  readonly inputs: number;
  readonly targets: string;
  readonly maxMs: number;
  readonly shared: SharedArrayBuffer;
}

const job = workerData as Job;
// [0] inputs started, [1] target index, [2] input length; then the input's bytes.
const head = new Int32Array(job.shared, 0, 4);
const body = new Uint8Array(job.shared, 16);
const result = runFuzz({
  seed: job.seed,
  inputs: job.inputs,
  targets: selectTargets(job.targets),
  maxMs: job.maxMs,
  onInput(index, target, input) {
    body.set(input.subarray(0, body.length));
    Atomics.store(head, 1, target);
    Atomics.store(head, 2, input.length);
    Atomics.store(head, 0, index + 1);
  },
  onEscape: (e) => parentPort?.postMessage({ type: 'escape', escape: e }),
});
parentPort?.postMessage({ type: 'done', result });
