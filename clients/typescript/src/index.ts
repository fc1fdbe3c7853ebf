/**
 * leaseq for TypeScript and JavaScript: the REST API's `Client`, a `Worker` that keeps
 * the lease's promise (a lead is worked on only while its lease is surely held), typed
 * errors, and `verifyFence`.
 */

export { Client, type ClientOptions, type CompleteItem, type LeaseRequest, type RenewItem } from "./client.js";
export * from "./errors.js";
export { type Fence, verifyFence } from "./fence.js";
export { DEFAULT_RETRY, NO_RETRY, type RetryPolicy, backoffS, newIdempotencyKey } from "./retry.js";
export type * from "./types.js";
export { Cached, HandlerStopped, type Handler, type Job, type StopReason, Throttled } from "./worker/job.js";
export { DEFAULT_WORKER_TTL_S, type Logger, type WorkerOptions } from "./worker/options.js";
export { Worker, type WorkerStats } from "./worker/worker.js";
