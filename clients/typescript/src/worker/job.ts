/**
 * What a handler gets (`Job`) and may give back besides a plain result (`Cached`,
 * `Throttled`), and why it is told to stop (`HandlerStopped` on `job.signal`).
 */

import type { Lead, Lease } from "../types.js";

/** Why a handler is stopped: its lease is gone or may end, its time is up, or the worker stops. */
export type StopReason = "lost" | "expired" | "max_runtime" | "shutdown";

/** The reason of an aborted `job.signal`. */
export class HandlerStopped extends Error {
  readonly why: StopReason;

  constructor(why: StopReason) {
    super(
      {
        lost: "the lease was lost",
        expired: "the lease may end before a renewal is confirmed",
        max_runtime: "the maximum runtime ended",
        shutdown: "the worker is stopping",
      }[why],
    );
    this.name = "HandlerStopped";
    this.why = why;
  }
}

/** A handler's result that was not worked for (it came from elsewhere): completed `cached`. */
export class Cached {
  constructor(readonly result: unknown = null) {}
}

/** Thrown by a handler when an upstream throttles: the lead goes back without using up an
 * attempt, and its whole session pauses for `retryAfterS` (1–3600). */
export class Throttled extends Error {
  readonly retryAfterS: number;

  constructor(retryAfterS: number, message = "throttled") {
    super(message);
    this.name = "Throttled";
    this.retryAfterS = Math.min(3600, Math.max(1, Math.ceil(retryAfterS)));
  }
}

/** One lead in a handler's hands. */
export interface Job {
  readonly lead: Lead;
  readonly lease: Lease;
  readonly attempt: number;
  /** Aborted when the handler must stop (its reason a `HandlerStopped`); pass it on to what
   * the handler awaits (`fetch(url, { signal: job.signal })`). */
  readonly signal: AbortSignal;
  /** Where the handler got to (any JSON): the lease's next renewal stores it on the lead, and
   * the next holder finds it in `lead.checkpoint` should this one lose the lease. */
  checkpoint(value: unknown): void;
}

/** A handler: its result (JSON) completes the lead `done`; a `Cached` one `cached`; an error
 * retries it later (failed on its last attempt). */
export type Handler = (job: Job) => unknown;
