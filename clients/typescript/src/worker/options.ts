/**
 * A worker's options, their defaults (chosen for a fleet of long-running workers), and
 * the checks that refuse a bad one before anything is leased.
 */

import { hostname } from "node:os";

import type { Sessions } from "../types.js";
import type { Handler } from "./job.js";

/** How a worker says what happens; `console` by default (warnings and errors only). */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface WorkerOptions {
  /** One session, several (leases go to the one furthest below its fair share), or null: any. */
  session: Sessions;
  handler: Handler;
  /** The name leases are taken under; `hostname-pid` by default. */
  owner?: string;
  /** Handlers running at once (default 1). */
  concurrency?: number;
  /** Leases held beyond `concurrency`, so the next lead is already there when a handler ends
   * (default: a quarter of `concurrency`, at least 1; 0: none). Timed and renewed as any lease,
   * and given back on shutdown. */
  prefetch?: number;
  /** The lease time asked for (1–3600 s); 30 s when left out (`DEFAULT_WORKER_TTL_S`, longer
   * to fit a `killGraceS`), not the service's `LEASEQ_LEASE_TTL_S`: renewed every third of it,
   * so a worker killed outright strands its leads for seconds, not minutes. */
  ttlS?: number;
  /** How long a lease waits for work when the queue is empty (0–30 s, default 5). */
  waitS?: number;
  /** A handler running longer is stopped and its lead retried later (default: no limit). */
  maxRuntimeS?: number;
  /** On `stop()` (SIGTERM, SIGINT): how long running handlers may go on before they are
   * stopped and their leads given back (default 10 s). */
  graceS?: number;
  /** How long a stopped handler has to end before it is abandoned (its lease then left to
   * expire, nothing sent): default 2 s, a tenth of a short ttl. */
  killGraceS?: number;
  /** Return from `run()` once the queue is empty (a whole wait brought nothing and nothing is
   * held). Default false: run until stopped. */
  untilEmpty?: boolean;
  /** End the run with `Unavailable` after this long without reaching the service (seconds);
   * default null: keep trying (the service may be restarting). */
  giveUpS?: number | null;
  /** Seconds before a lead whose handler failed on attempt n is leased again: 1 s doubling,
   * at most 300, jittered (while attempts remain; then it is completed `failed`). */
  retryDelayS?: (attempt: number) => number;
  logger?: Logger;
}

export const DEFAULT_WAIT_S = 5;
export const DEFAULT_GRACE_S = 10;
export const MAX_PREFETCH = 100;

export function defaultOwner(): string {
  return `${hostname()}-${process.pid}`;
}

export function defaultPrefetch(concurrency: number): number {
  return Math.max(1, Math.ceil(concurrency / 4));
}

export function defaultRetryDelayS(attempt: number): number {
  const delay = Math.min(300, 2 ** Math.max(attempt - 1, 0));
  return delay * (0.75 + Math.random() * 0.25);
}

export const consoleLogger: Logger = {
  info: () => undefined,
  warn: (message) => console.warn(`leaseq: ${message}`),
  error: (message) => console.error(`leaseq: ${message}`),
};

function seconds(name: string, value: number | null | undefined, low: number, high: number): void {
  if (value !== undefined && value !== null && !(Number.isFinite(value) && value >= low && value <= high)) {
    throw new RangeError(`${name} must be from ${low} to ${high} seconds, not ${String(value)}`);
  }
}

function count(name: string, value: number | undefined, low: number, high: number): void {
  if (value !== undefined && !(Number.isInteger(value) && value >= low && value <= high)) {
    throw new RangeError(`${name} must be an integer from ${low} to ${high}, not ${String(value)}`);
  }
}

/** Refuse an option out of range (RangeError) or of the wrong kind (TypeError). */
export function checkOptions(options: WorkerOptions): void {
  if (typeof options.handler !== "function") {
    throw new TypeError("handler must be a function");
  }
  const session = options.session;
  if (session !== null && typeof session !== "string" && !(Array.isArray(session) && session.length > 0)) {
    throw new TypeError("session: give a session, several, or null for any session");
  }
  count("concurrency", options.concurrency, 1, 10_000);
  count("prefetch", options.prefetch, 0, MAX_PREFETCH);
  seconds("ttlS", options.ttlS, 1, 3600);
  seconds("waitS", options.waitS, 0, 30);
  seconds("maxRuntimeS", options.maxRuntimeS, 0.001, 366 * 86400);
  seconds("graceS", options.graceS, 0, 366 * 86400);
  seconds("killGraceS", options.killGraceS, 0, 3600);
  seconds("giveUpS", options.giveUpS, 0.001, 366 * 86400);
  if (options.ttlS !== undefined && options.killGraceS !== undefined && options.killGraceS > options.ttlS / 2 - Math.min(1, options.ttlS / 10)) {
    throw new RangeError(`a kill grace of ${options.killGraceS}s is too long for a ttl of ${options.ttlS}s: the stop must leave half the ttl for renewals`);
  }
}

/** The lease a worker asks for when given no `ttlS`: short, since its heartbeat renews every
 * third of it anyway, so a worker killed outright strands its leads for seconds, not for the
 * service's default of minutes (docs/worker.md#lease-length). */
export const DEFAULT_WORKER_TTL_S = 30;

/** The ttl a worker asks for: `ttlS`, else `DEFAULT_WORKER_TTL_S`, made long enough for a
 * `killGraceS` given (the stop must leave half the ttl for renewals). */
export function workerTtlS(options: { ttlS?: number; killGraceS?: number }): number {
  if (options.ttlS !== undefined) return options.ttlS;
  if (options.killGraceS === undefined) return DEFAULT_WORKER_TTL_S;
  return Math.min(3600, Math.max(DEFAULT_WORKER_TTL_S, 2 * options.killGraceS + 2));
}
