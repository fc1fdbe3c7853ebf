/**
 * How a call is retried when the service could not answer it: a connection error, a
 * timeout, or a 502, 503 or 504 answer. Never a 4xx: the service refused, and a repeat
 * would be refused again.
 *
 * The n-th retry waits about `baseS * 2^n` (at most `maxS`), half of it fixed and half
 * random so a fleet cut off at once does not come back in step; an answer with
 * `Retry-After` says how long instead (the same rule as the Python client's). A retry must never turn one intent into two effects, so the
 * calls that are not safe to repeat as they are (push, lease, a completion with `next`)
 * carry an `Idempotency-Key` (`newIdempotencyKey`), the same on every retry.
 */

import { randomUUID } from "node:crypto";

export interface RetryPolicy {
  /** Tries in all, the first included (1: no retry). */
  attempts: number;
  /** The first retry's delay, in seconds (before jitter). */
  baseS: number;
  /** The longest delay the backoff reaches, in seconds (a `Retry-After` may ask for more). */
  maxS: number;
}

/** Six tries over about three seconds, as the Python client's. */
export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({ attempts: 6, baseS: 0.1, maxS: 2 });
/** One try: the caller retries on its own schedule (the worker's heartbeat). */
export const NO_RETRY: Readonly<RetryPolicy> = Object.freeze({ attempts: 1, baseS: 0.1, maxS: 2 });
/** The longest `Retry-After` honoured, in seconds: a longer one is taken as this. */
export const MAX_RETRY_AFTER_S = 60;

/** Seconds before retry number `retry` (0 for the first): the backoff, or when the service said
 * `Retry-After`, that long (at most 60 s) plus up to a fifth more at random, so a fleet told
 * "in a second" does not come back in step. */
export function backoffS(
  policy: Readonly<RetryPolicy>,
  retry: number,
  retryAfterS?: number,
  random: () => number = Math.random,
): number {
  if (retryAfterS !== undefined) {
    return Math.min(Math.max(retryAfterS, 0), MAX_RETRY_AFTER_S) * (1 + random() * 0.2);
  }
  const cap = Math.min(policy.maxS, policy.baseS * 2 ** Math.max(0, retry));
  return cap / 2 + random() * (cap / 2);
}

/** The seconds of a `Retry-After` header (delay-seconds or an HTTP date), or undefined. */
export function retryAfterOf(header: string | null | undefined, now: number = Date.now()): number | undefined {
  if (header === null || header === undefined) {
    return undefined;
  }
  const text = header.trim();
  if (/^[0-9]+$/.test(text)) {
    return Number(text);
  }
  const at = /[A-Za-z]/.test(text) ? Date.parse(text) : NaN; // an HTTP date names its day
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}

/** A key for one logical request, sent again with each of its retries. */
export function newIdempotencyKey(): string {
  return randomUUID();
}

/** Resolves after `seconds`, or at once when `signal` aborts (never rejects). */
export function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  if (seconds <= 0 || signal?.aborted) {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, seconds * 1000);
    signal?.addEventListener("abort", done, { once: true });
  });
}
