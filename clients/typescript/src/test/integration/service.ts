// What the integration tests share: the service they talk to (LEASEQ_TEST_URL, started by
// tests/clients/test_typescript.py), a fresh session name per test, a fetch that records
// what the client sends (the service answers it), and a poll whose deadline is its only
// failure.
import { randomUUID } from "node:crypto";

import { Client, type ClientOptions, type HandlerStopped, type Job } from "../../index.js";

export const URL = process.env.LEASEQ_TEST_URL ?? "";
export const TOKEN = process.env.LEASEQ_TEST_TOKEN ?? "";
/** Why the tests skip, when they must. */
export const NO_SERVICE = URL ? undefined : "LEASEQ_TEST_URL names no leaseq serve (tests/clients/test_typescript.py starts one)";

export function session(): string {
  return `ts-${randomUUID().slice(0, 8)}`;
}

export function client(options: ClientOptions = {}): Client {
  return new Client(URL, { token: TOKEN, ...options });
}

export interface Recorded {
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown> | undefined;
  status: number;
}

/** A fetch that sends every request to the service and records it with its answer's status. */
export function recording(): { fetch: typeof fetch; seen: Recorded[] } {
  const seen: Recorded[] = [];
  const fetchFn = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const answer = await fetch(url, init);
    const headers = { ...((init?.headers ?? {}) as Record<string, string>) };
    const body = typeof init?.body === "string" ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
    seen.push({ path: new globalThis.URL(String(url)).pathname, headers, body, status: answer.status });
    return answer;
  };
  return { fetch: fetchFn as typeof fetch, seen };
}

/** Poll `condition` until it is truthy; fail after `timeoutS`. */
export async function until<T>(condition: () => Promise<T> | T, timeoutS: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutS * 1000;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutS}s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A promise and the function that resolves it. */
export function gate(): { opened: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Rejects with the job's stop reason once its signal aborts; each reason's `why` goes to
 * `reasons` (`lead:why` when `withLead`). */
export function stoppedBy(job: Job, reasons: string[] = [], withLead = false): Promise<never> {
  return new Promise((_, reject) =>
    job.signal.addEventListener("abort", () => {
      const why = (job.signal.reason as HandlerStopped).why;
      reasons.push(withLead ? `${job.lead.id}:${why}` : why);
      reject(job.signal.reason);
    }),
  );
}
