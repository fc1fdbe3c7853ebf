/**
 * One call to the service over HTTP: the request sent with the global `fetch`, its
 * answer read whole, retried as `retry.ts` says, and an error answer thrown as the
 * class of its problem code (`errors.ts`).
 *
 * Each try has its own timeout (`timeoutS`, plus the time a long poll may wait), so
 * a hung connection never holds a call longer than that; the caller's `signal` ends
 * the call and its retries at once.
 */

import { LeaseqError, Unavailable, errorOf } from "./errors.js";
import { DEFAULT_RETRY, type RetryPolicy, backoffS, retryAfterOf, sleep } from "./retry.js";

export const DEFAULT_TIMEOUT_S = 10;
export const IDEMPOTENCY_HEADER = "Idempotency-Key";

/** One request of an endpoint. */
export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Each try's timeout in seconds; the transport's own when left out. */
  timeoutS?: number;
  /** How it is retried; the transport's own when left out. */
  retry?: Readonly<RetryPolicy>;
  /** Ends the call, and its retries, when it aborts. */
  signal?: AbortSignal;
  /** The answer is text (metrics), not JSON. */
  text?: boolean;
}

/** What the client sends with: a `fetch` (tests give theirs), the service's URL and headers. */
export interface TransportOptions {
  token?: string;
  timeoutS?: number;
  retry?: Readonly<RetryPolicy>;
  fetch?: typeof fetch;
  /** Told of each retry: the call, why, and the seconds before the next try. */
  onRetry?: (call: Call, error: LeaseqError, delayS: number) => void;
}

const RETRIED = new Set([502, 503, 504]);

export class Transport {
  readonly url: string;
  readonly timeoutS: number;
  readonly retry: Readonly<RetryPolicy>;
  private readonly headers: Record<string, string>;
  private readonly fetch: typeof fetch;
  private readonly onRetry: TransportOptions["onRetry"];

  constructor(url: string, options: TransportOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.timeoutS = options.timeoutS ?? DEFAULT_TIMEOUT_S;
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.onRetry = options.onRetry;
    this.headers = { accept: "application/json" };
    if (options.token) {
      this.headers.authorization = `Bearer ${options.token}`;
    }
  }

  /** Send `call`, retried as its policy says; its answer's JSON (or text). Throws a `LeaseqError`. */
  async send<T>(call: Call): Promise<T> {
    const policy = call.retry ?? this.retry;
    for (let retry = 0; ; retry += 1) {
      let failure: LeaseqError;
      try {
        return (await this.once(call)) as T;
      } catch (error) {
        if (!(error instanceof LeaseqError)) {
          throw error;
        }
        failure = error;
      }
      const retryable = failure.status === undefined || RETRIED.has(failure.status);
      if (!retryable || retry + 1 >= policy.attempts || call.signal?.aborted) {
        throw failure;
      }
      const delay = backoffS(policy, retry, failure.retryAfterS);
      this.onRetry?.(call, failure, delay);
      await sleep(delay, call.signal);
      if (call.signal?.aborted) {
        throw failure;
      }
    }
  }

  /** One try: the answer, or the error it stands for (no answer at all: `Unavailable`). */
  private async once(call: Call): Promise<unknown> {
    const timeoutS = call.timeoutS ?? this.timeoutS;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutS * 1000);
    const stop = (): void => controller.abort();
    call.signal?.addEventListener("abort", stop, { once: true });
    const where = `${call.method} ${this.url}${call.path}`;
    try {
      const headers = { ...this.headers, ...call.headers };
      let body: string | undefined;
      if (call.body !== undefined) {
        headers["content-type"] = "application/json";
        body = JSON.stringify(call.body);
      }
      let response: Response;
      let text: string;
      try {
        response = await this.fetch(this.url + call.path, {
          method: call.method,
          headers,
          body,
          signal: controller.signal,
        });
        text = await response.text();
      } catch (error) {
        const why = controller.signal.aborted && !call.signal?.aborted ? `no answer in ${timeoutS}s` : describe(error);
        throw new Unavailable(`${where}: ${why}`, { cause: error });
      }
      if (response.ok) {
        if (call.text) {
          return text;
        }
        return text === "" ? undefined : JSON.parse(text);
      }
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: a proxy's page; its text is the detail
      }
      return Promise.reject(errorOf(response.status, parsed, retryAfterOf(response.headers.get("retry-after"))));
    } finally {
      clearTimeout(timer);
      call.signal?.removeEventListener("abort", stop);
    }
  }
}

/** An error as one line: its message, and the cause's (fetch's "fetch failed" says little). */
export function describe(error: unknown): string {
  if (!(error instanceof Error)) {
    return String(error);
  }
  const cause = (error as { cause?: unknown }).cause;
  const more = cause instanceof Error ? `: ${cause.message}` : "";
  return `${error.message || error.name}${more}`;
}
