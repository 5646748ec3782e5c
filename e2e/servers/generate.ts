/**
 * The servers' side of `generate`: open the page's stream from its zero-RTT ticket and stream
 * deterministic tokens, honouring stop (send a tail, then finalize) and cancel (stop; a further send
 * fails). Runtime-agnostic: the Node WebSocket server and the Deno WebTransport server share it.
 */
import { z } from 'zod';
import { LanemuxError, isLanemuxError } from '../../src/index.ts';
import type { LanemuxNode, StreamSender } from '../../src/index.ts';
import type { Messenger } from '../../src/messenger/index.ts';
import { GENERATE_HANDLER, tailText, tokenText } from '../support/protocol.ts';
import type { GenerateReply } from '../support/protocol.ts';

const requestSchema = z.object({
  handle: z.string().min(1).max(256),
  ticket: z.string().min(1).max(4096),
  prompt: z.string().min(1).max(128),
  n: z.number().int().min(0).max(10_000_000),
  delayMs: z.number().int().min(0).max(60_000),
  tail: z.number().int().min(0).max(1000),
});

/** What a server saw of one stream (by prompt). */
export interface ServedStream {
  readonly prompt: string;
  readonly peer: string;
  /** `send()` calls that resolved (the stream took the token). */
  accepted: number;
  /** A `send()` is pending: the stream is paused at its byte budget (or out of credit and withheld). */
  waiting: boolean;
  outcome: 'streaming' | 'finalized' | 'stopped' | 'cancelled' | 'error';
  /** Tail tokens sent after a stop. */
  tailSent: number;
  /** Code of the first failed send (after a cancel, or the stream lost). */
  sendErrorCode: string | null;
  sendErrorRetryable: boolean | null;
  /** Code of the `cancelSignal` reason, once it fired. */
  cancelReason: string | null;
}

/** Register `generate` on a server's messenger; returns the per-prompt records. */
export function serveGenerate(node: LanemuxNode, messenger: Messenger): Map<string, ServedStream> {
  const served = new Map<string, ServedStream>();
  messenger.handle(GENERATE_HANDLER, async (from, body): Promise<GenerateReply> => {
    const parsed = requestSchema.safeParse(body);
    if (!parsed.success)
      throw new LanemuxError(
        'ERR_BAD_REQUEST',
        `malformed generate request: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
      );
    const req = parsed.data;
    const sender = await node.openAnchorStream<string>(req.handle, req.ticket);
    const rec: ServedStream = {
      prompt: req.prompt,
      peer: from,
      accepted: 0,
      waiting: false,
      outcome: 'streaming',
      tailSent: 0,
      sendErrorCode: null,
      sendErrorRetryable: null,
      cancelReason: null,
    };
    served.set(req.prompt, rec);
    void produce(sender, req, rec);
    return { ok: true, resumeToken: sender.resumeToken };
  });
  return served;
}

async function produce(
  sender: StreamSender<string>,
  req: z.output<typeof requestSchema>,
  rec: ServedStream,
): Promise<void> {
  // Pacing waits end early on stop or cancel, so the reaction does not depend on the delay.
  const woken = new Promise<void>((resolve) => {
    sender.stopSignal.addEventListener('abort', () => resolve(), { once: true });
    sender.cancelSignal.addEventListener(
      'abort',
      () => {
        const r: unknown = sender.cancelSignal.reason;
        rec.cancelReason = isLanemuxError(r) ? r.code : String(r);
        resolve();
      },
      { once: true },
    );
  });
  try {
    for (let i = 0; i < req.n; i++) {
      if (sender.cancelSignal.aborted) break;
      if (sender.stopSignal.aborted) {
        for (let k = 0; k < req.tail; k++) {
          await sender.send(tailText(req.prompt, k));
          rec.tailSent++;
        }
        await sender.finalize();
        rec.outcome = 'stopped';
        return;
      }
      const p = sender.send(tokenText(req.prompt, i));
      rec.waiting = true;
      await p;
      rec.waiting = false;
      rec.accepted++;
      if (req.delayMs > 0) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([woken, new Promise<void>((r) => (timer = setTimeout(r, req.delayMs)))]);
        clearTimeout(timer);
      }
    }
    if (sender.cancelSignal.aborted) {
      rec.outcome = consumerCancelled(rec) ? 'cancelled' : 'error';
      // Further sends fail: record how.
      await sender.send(tokenText(req.prompt, rec.accepted)).then(
        () => void 0,
        (e: unknown) => recordError(rec, e),
      );
      return;
    }
    await sender.finalize();
    rec.outcome = 'finalized';
  } catch (e) {
    rec.waiting = false;
    rec.outcome = consumerCancelled(rec) ? 'cancelled' : 'error';
    recordError(rec, e);
  }
}

/** The consumer cancelled (its LifecycleSlot{cancel}), as opposed to the stream being lost. */
function consumerCancelled(rec: ServedStream): boolean {
  return rec.cancelReason === 'ERR_STREAM_CANCELLED';
}

function recordError(rec: ServedStream, e: unknown): void {
  if (rec.sendErrorCode !== null) return;
  rec.sendErrorCode = isLanemuxError(e) ? e.code : `NOT_LANEMUX: ${String(e)}`;
  rec.sendErrorRetryable = isLanemuxError(e) ? e.retryable : null;
}
