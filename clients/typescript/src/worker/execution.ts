/**
 * Running one lead's handler: until it ends, its lease may end, its maximum runtime ends
 * or the worker stops it; and what came of it (an `Outcome`). Sends nothing: the worker
 * settles the lead from the outcome.
 *
 * The handler is told to stop by its `job.signal` (the reason a `HandlerStopped`) at the
 * lease's `stopAt` unless a renewal came first, at once when a renewal says the lease is
 * lost, or when its maximum runtime ends. It then has its kill grace and the margin to
 * end; one that does not is abandoned: nothing is sent for it, and its lease expires.
 */

import { type Held, monotonicS as clock } from "./held.js";
import { Cached, type Handler, HandlerStopped, type Job, Throttled } from "./job.js";
import type { Logger } from "./options.js";

/** How a handler's run ended, and so what the worker sends. */
export type Outcome =
  | { kind: "done" | "cached"; result: unknown } // complete
  | { kind: "error"; error: string } // release for a retry, or complete failed on the last attempt
  | { kind: "throttled"; throttleS: number } // release with throttle_s: the session pauses
  | { kind: "lost" | "abandoned" } // send nothing
  | { kind: "shutdown" }; // release for another worker

/** What the handler is given for the lead of `h`. */
function jobOf(h: Held): Job {
  return {
    lead: h.lease.lead,
    lease: h.lease,
    attempt: h.lease.attempt,
    signal: h.controller.signal,
    checkpoint: (value: unknown) => {
      if (value === undefined || value === null) {
        throw new TypeError("a checkpoint is any JSON but null");
      }
      JSON.stringify(value); // throws for what JSON cannot carry
      h.checkpoint = { value, sent: false };
    },
  };
}

/** Run `handler` on the lead of `h` until it ends or must stop; what came of it. */
export async function execute(
  h: Held,
  handler: Handler,
  maxRuntimeS: number | undefined,
  log: Logger,
): Promise<Outcome> {
  let finished = false;
  let value: unknown;
  let failure: unknown;
  const work = (async () => handler(jobOf(h)))().then(
    (v) => {
      finished = true;
      value = v;
    },
    (e: unknown) => {
      finished = true;
      failure = e ?? new Error("the handler failed");
    },
  );
  while (!finished && h.reason === undefined) {
    const reason = h.due(clock(), maxRuntimeS);
    if (reason !== undefined) {
      h.interrupt(reason);
      break;
    }
    await until(h, h.deadline(maxRuntimeS), work);
  }
  const finishedFirst = finished; // before any abort: a result it chose to return
  if (!finished) {
    h.controller.abort(new HandlerStopped(h.reason ?? "shutdown"));
    const patience = h.killGraceS + h.margin;
    await until(h, clock() + patience, work, false);
    if (!finished) {
      log.error(`lead ${h.id}: the handler did not end within ${patience.toFixed(1)}s of being stopped (${h.reason}); its lease is left to expire`);
      return { kind: "abandoned" };
    }
  }
  if (h.lost) return { kind: "lost" };
  if (finishedFirst) {
    if (failure === undefined) {
      return value instanceof Cached ? { kind: "cached", result: value.result } : { kind: "done", result: value };
    }
    if (failure instanceof Throttled) return { kind: "throttled", throttleS: failure.retryAfterS };
    if (h.reason === undefined) return { kind: "error", error: errorText(failure) };
  }
  if (h.reason === "max_runtime") return { kind: "error", error: `max runtime (${maxRuntimeS}s)` };
  return { kind: "shutdown" };
}

/** Until `deadline` (the worker's clock), `work` ends, or (when `woken`) the lease is
 * interrupted: one timer, whatever comes first. */
async function until(h: Held, deadline: number, work: Promise<void>, woken = true): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, deadline - clock()) * 1000);
      if (woken) h.wake = resolve;
    }),
  ]);
  clearTimeout(timer);
  h.wake = undefined;
}

/** A handler's error as the text an attempt records (no NUL: PostgreSQL text has none). */
function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.replaceAll("\0", "");
}
