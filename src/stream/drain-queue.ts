/**
 * One microtask per burst of wake-ups for push-mode readers: every anchor that became readable
 * while a batch was applied is drained in the same job, after ingress has finished with the batch.
 * So a pass that reaches 256 consumers costs one microtask, not 256 promises. (A reader that waits
 * on an empty buffer needs no wake-up: ingress hands it the item directly, see `StreamAnchor._direct`.)
 */

/** Something the queue drains. */
export interface Drainable {
  /** Read what is available now; called once per enqueue. */
  drain(): void;
}

let queue: Drainable[] = [];
let spare: Drainable[] = [];
let scheduled = false;

function run(): void {
  // Wake-ups that arrive while draining (a consumer's resume, a local sender) go to the next job.
  const q = queue;
  queue = spare;
  scheduled = false;
  for (let i = 0; i < q.length; i++) {
    const d = q[i]!;
    q[i] = undefined as unknown as Drainable;
    try {
      d.drain();
    } catch (e) {
      // drain() catches its consumer's errors; anything else is a bug, reported without
      // losing the other anchors' wake-ups.
      queueMicrotask(() => {
        throw e;
      });
    }
  }
  q.length = 0;
  spare = q;
}

/** Drain `d` in the next queue job (the caller guarantees it is queued at most once at a time). */
export function enqueueDrain(d: Drainable): void {
  queue.push(d);
  if (!scheduled) {
    scheduled = true;
    queueMicrotask(run);
  }
}
