/**
 * `Worker`: leases leads and runs a handler on each, keeping the lease's promise: a lead
 * is worked on only while its lease is surely held, and one intent is never two effects.
 *
 * - It leases into its free lease slots (`concurrency` handlers, plus `prefetch` leases
 *   waiting for one), by long poll when the queue is empty.
 * - Each lease is timed from when its request was sent, with the `ttl_s` granted
 *   (`held.ts`), and renewed on that schedule (`heartbeat.ts`).
 * - A handler whose lease was lost, may end before a renewal is confirmed, or whose
 *   maximum runtime ended has its `job.signal` aborted, a kill grace before the lease can
 *   end; one that does not end is abandoned (nothing is sent; the lease expires).
 * - Results are completed together with the next leases (`completions.ts`); a lease
 *   stays held until its completion is confirmed. A failed handler's lead is released
 *   with a backoff while attempts remain, else completed `failed`.
 * - `stop()` (SIGTERM, SIGINT with `run({ handleSignals: true })`): no more leases;
 *   leases not started are given back at once, running handlers get `graceS`, then are
 *   stopped and their leads released. A second `stop()` stops them at once.
 */

import type { Client, LeaseRequest } from "../client.js";
import { LeaseLost, LeaseqError, Unavailable, ValidationError } from "../errors.js";
import { describe } from "../http.js";
import { DEFAULT_RETRY, backoffS, newIdempotencyKey, sleep } from "../retry.js";
import type { Lease } from "../types.js";
import { MAX_ITEM_BATCH } from "../wire.js";
import { Completions, type Settlement } from "./completions.js";
import { Heartbeat } from "./heartbeat.js";
import { Held, monotonicS } from "./held.js";
import { type Outcome, execute } from "./execution.js";
import {
  DEFAULT_GRACE_S,
  DEFAULT_WAIT_S,
  type Logger,
  type WorkerOptions,
  checkOptions,
  consoleLogger,
  defaultOwner,
  defaultPrefetch,
  defaultRetryDelayS,
  workerTtlS,
} from "./options.js";

const IDLE_POLL_S = 1; // an empty lease is not repeated sooner than this
const MAX_ERROR_CHARS = 65_536;

/** What a worker did. */
export interface WorkerStats {
  leased: number;
  done: number;
  failed: number;
  cached: number;
  /** Given back: to be retried after an error, throttled, or on shutdown. */
  released: number;
  /** Its lease was lost (or could not be confirmed) before the lead was settled. */
  lost: number;
  /** The handler did not end when told to stop: nothing sent, its lease left to expire. */
  abandoned: number;
  /** Handlers that threw (or ran past their maximum runtime). */
  errors: number;
}

/** Wakes whoever waits for the worker's state to change (a slot freed, a stop). */
class Notifier {
  private waiters: (() => void)[] = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

export class Worker {
  readonly client: Client;
  readonly owner: string;
  readonly concurrency: number;
  readonly prefetch: number;
  readonly stats: WorkerStats = { leased: 0, done: 0, failed: 0, cached: 0, released: 0, lost: 0, abandoned: 0, errors: 0 };
  private readonly options: WorkerOptions;
  private readonly log: Logger;
  private readonly held = new Map<string, Held>(); // by token: a lead may come back
  private waiting: Held[] = []; // confirmed, not started: in the order they came
  private running = 0;
  private asking = 0; // leases asked for by requests in flight
  private readonly tasks = new Set<Promise<void>>();
  private readonly changed = new Notifier();
  private readonly heartbeat: Heartbeat;
  private readonly completions: Completions;
  private stoppingAt: number | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private poll: AbortController | undefined;
  private readonly stopped = new AbortController(); // aborted by stop(): wakes the pauses
  private fatal: LeaseqError | undefined;
  /** The service refused `unstarted`: every release counts as an attempt there. */
  private plainReleases = false;
  private started = false;

  constructor(client: Client, options: WorkerOptions) {
    checkOptions(options);
    this.client = client;
    this.options = options;
    this.owner = options.owner ?? defaultOwner();
    this.concurrency = options.concurrency ?? 1;
    this.prefetch = options.prefetch ?? defaultPrefetch(this.concurrency);
    this.log = options.logger ?? consoleLogger;
    const clock = (): number => this.clock();
    this.heartbeat = new Heartbeat({
      client,
      clock,
      held: () => this.held.values(),
      lost: (h) => this.lost(h),
      checkDeadlines: () => this.checkDeadlines(),
      warn: (m) => this.log.warn(m),
    });
    this.completions = new Completions({
      client,
      clock,
      ask: (freed) => this.ask(freed),
      asked: (ask) => {
        this.asking -= ask.max ?? 1;
        this.changed.notify();
      },
      take: (leases, sent, received) => leases.forEach((l) => this.take(l, sent, received)),
      settled: (s, confirmed) => this.settled(s, confirmed),
      refused: (s, why) => this.track(this.fail(s.held, why)),
      fatal: (error) => this.end(error),
      warn: (m) => this.log.warn(m),
    });
  }

  get stopping(): boolean {
    return this.stoppingAt !== undefined;
  }

  /** The worker's clock: monotonic seconds. */
  clock(): number {
    return monotonicS();
  }

  /**
   * Work until stopped (or, with `untilEmpty`, until the queue is empty); returns what it
   * did. Throws what ended the run early: the service's refusal (`Unauthorized`,
   * `Forbidden`, `ValidationError` …), or `Unavailable` after `giveUpS` out of reach.
   * With `handleSignals`, SIGTERM and SIGINT call `stop()` meanwhile.
   */
  async run(options: { handleSignals?: boolean } = {}): Promise<WorkerStats> {
    if (this.started) {
      throw new Error("a Worker runs once: make a new one");
    }
    this.started = true;
    const onSignal = (): void => this.stop();
    const signals = options.handleSignals ? (["SIGTERM", "SIGINT"] as const) : [];
    for (const signal of signals) process.on(signal, onSignal);
    const beating = this.heartbeat.run();
    try {
      await this.leaseLoop();
      await this.drain();
    } finally {
      clearTimeout(this.graceTimer);
      this.heartbeat.stop();
      await beating;
      for (const signal of signals) process.off(signal, onSignal);
    }
    if (this.fatal !== undefined) {
      throw this.fatal;
    }
    return this.stats;
  }

  /** Lease no more; leases not started go back at once, running handlers get `graceS`, then
   * are stopped and released. Called again: they are stopped now. */
  stop(): void {
    if (this.stoppingAt !== undefined) {
      this.log.info(`stopping now: ${this.running} handlers stopped`);
      this.interruptAll();
      return;
    }
    this.stoppingAt = this.clock();
    const graceS = this.options.graceS ?? DEFAULT_GRACE_S;
    this.log.info(`stopping: no new leases; ${this.running} running get ${graceS}s`);
    this.giveBackWaiting();
    this.graceTimer = setTimeout(() => this.interruptAll(), graceS * 1000);
    this.stopped.abort();
    this.changed.notify();
  }

  /** End the run with `error`: no grace. */
  private end(error: LeaseqError): void {
    this.fatal ??= error;
    if (this.stoppingAt === undefined) {
      this.stoppingAt = this.clock();
      this.giveBackWaiting();
    }
    this.interruptAll();
    this.stopped.abort();
    this.changed.notify();
  }

  private interruptAll(): void {
    this.poll?.abort();
    for (const h of this.held.values()) {
      if (h.phase === "running") h.interrupt("shutdown");
    }
    this.giveBackWaiting();
  }

  private giveBackWaiting(): void {
    const idle = [...this.held.values()].filter((h) => h.phase === "waiting" || h.phase === "confirming");
    this.waiting = [];
    for (const h of idle) this.track(this.release(h, { error: "shutdown", unstarted: true }));
  }

  // -- leasing --------------------------------------------------------------

  private free(): number {
    return this.concurrency + this.prefetch - this.held.size - this.asking;
  }

  private ask(freed: number): LeaseRequest | undefined {
    const max = Math.min(MAX_ITEM_BATCH, this.free() + freed);
    if (this.stopping || max <= 0) {
      return undefined;
    }
    this.asking += max;
    return this.leaseRequest(max, 0);
  }

  private leaseRequest(max: number, waitS: number): LeaseRequest {
    const ask: LeaseRequest = { session: this.options.session, owner: this.owner, max, waitS };
    ask.ttlS = workerTtlS(this.options);
    return ask;
  }

  private async leaseLoop(): Promise<void> {
    const waitS = this.options.waitS ?? DEFAULT_WAIT_S;
    const giveUpS = this.options.giveUpS ?? null;
    let failingSince: number | undefined;
    let failures = 0;
    while (!this.stopping) {
      const free = Math.min(MAX_ITEM_BATCH, this.free());
      if (free <= 0) {
        await this.changed.wait();
        continue;
      }
      const sent = this.clock();
      let leases: Lease[];
      this.asking += free;
      this.poll = new AbortController();
      try {
        leases = await this.client.lease(this.leaseRequest(free, waitS), {
          idempotencyKey: newIdempotencyKey(),
          signal: this.poll.signal,
        });
      } catch (error) {
        if (this.poll.signal.aborted) return; // stopped, and the grace ran out
        if (!(error instanceof Unavailable)) {
          this.end(error instanceof LeaseqError ? error : new LeaseqError(describe(error), { cause: error }));
          return;
        }
        failingSince ??= sent;
        const delay = backoffS(this.client.transport.retry, failures, error.retryAfterS);
        failures += 1;
        const failing = this.clock() - failingSince;
        if (giveUpS !== null && failing + delay >= giveUpS) {
          this.end(new Unavailable(`gave up after ${failing.toFixed(1)}s without reaching the service (${error.detail})`));
          return;
        }
        this.log.warn(`lease failed (${error.detail}); again in ${delay.toFixed(1)}s`);
        await this.pause(delay);
        continue;
      } finally {
        this.asking -= free;
        this.poll = undefined;
      }
      failingSince = undefined;
      failures = 0;
      const received = this.clock();
      for (const lease of leases) this.take(lease, sent, received);
      if (leases.length > 0) continue;
      // Empty after its whole wait: the queue is empty (sooner: the service cut the wait short).
      const waited = received - sent >= waitS * 0.9;
      if (this.options.untilEmpty && waited && this.held.size === 0 && this.asking === 0) {
        this.log.info("queue empty: stopping");
        return;
      }
      await this.pause(IDLE_POLL_S - (received - sent));
    }
  }

  /** Sleep, waking early when the worker is told to stop. */
  private pause(seconds: number): Promise<void> {
    return sleep(seconds, this.stopped.signal);
  }

  /** Hold a lease whose request was sent at `sent`; run it when a slot is free. */
  private take(lease: Lease, sent: number, received: number): void {
    this.stats.leased += 1;
    const ttlS = lease.ttl_s ?? workerTtlS(this.options);
    const h = new Held(lease, sent, ttlS, received, this.options.killGraceS);
    this.held.set(lease.token, h);
    this.heartbeat.due(h.renewAt); // wakes the heartbeat when this one is due before it wakes
    if (this.stopping) {
      this.track(this.release(h, { error: "shutdown", unstarted: true })); // leased while stopping: straight back
      return;
    }
    if (h.confirmed) {
      this.waiting.push(h);
      this.pump();
      return;
    }
    this.log.info(`lead ${h.id}: its lease came late; confirming it before it runs`);
    h.wake = () => {
      if (h.confirmed && h.phase === "confirming" && !this.stopping) {
        h.phase = "waiting";
        this.waiting.push(h);
        this.pump();
      }
    };
  }

  /** Start waiting leases in the free handler slots. */
  private pump(): void {
    while (this.running < this.concurrency && this.waiting.length > 0 && !this.stopping) {
      const h = this.waiting.shift() as Held;
      if (h.due(this.clock(), undefined) !== undefined) {
        this.drop(h, "lost");
        continue;
      }
      this.running += 1;
      h.phase = "running";
      h.started = this.clock();
      this.track(this.live(h));
    }
  }

  private track(task: Promise<void>): void {
    const tracked = task
      .catch((error: unknown) => this.log.error(`unexpected error in the worker: ${describe(error)}`))
      .finally(() => {
        this.tasks.delete(tracked);
        this.changed.notify();
      });
    this.tasks.add(tracked);
  }

  /** Wait until nothing is held, in flight or being sent. */
  private async drain(): Promise<void> {
    while (this.tasks.size > 0 || this.held.size > 0) {
      await this.changed.wait();
    }
    await this.completions.idle();
  }

  // -- one lead ---------------------------------------------------------------

  /** One lead's life in its handler slot: run, then settled. The slot is free for the next
   * lead once the handler ends; the lease stays held until its completion is confirmed. */
  private async live(h: Held): Promise<void> {
    let outcome: Outcome;
    try {
      outcome = await execute(h, this.options.handler, this.options.maxRuntimeS, this.log);
    } finally {
      this.running -= 1;
      this.pump();
    }
    await this.settle(h, outcome);
  }

  /** Send what the outcome calls for; nothing for a lost or abandoned lease. */
  private async settle(h: Held, outcome: Outcome): Promise<void> {
    switch (outcome.kind) {
      case "done":
      case "cached": {
        let result = outcome.result === undefined ? null : outcome.result;
        try {
          JSON.stringify(result);
        } catch (error) {
          return this.fail(h, `the result is not JSON: ${describe(error)}`);
        }
        if (typeof result === "bigint") result = null;
        h.phase = "settling";
        this.completions.add({ held: h, status: outcome.kind, result });
        return;
      }
      case "error":
        return this.fail(h, outcome.error);
      case "throttled":
        this.log.warn(`lead ${h.id}: throttled; its session pauses for ${outcome.throttleS}s`);
        return this.release(h, { error: "throttled", throttleS: outcome.throttleS });
      case "shutdown":
        return this.release(h, { error: "shutdown" });
      case "lost":
        return this.drop(h, "lost");
      case "abandoned":
        return this.drop(h, "abandoned");
    }
  }

  /** A failed attempt: retried later while attempts remain, else completed `failed`. */
  private async fail(h: Held, error: string): Promise<void> {
    this.stats.errors += 1;
    const text = error.slice(0, MAX_ERROR_CHARS);
    const { attempt } = h.lease;
    if (attempt < h.lease.lead.max_attempts) {
      const delayS = Math.max(0, (this.options.retryDelayS ?? defaultRetryDelayS)(attempt));
      this.log.warn(`lead ${h.id} attempt ${attempt} failed, retry in ${delayS.toFixed(1)}s: ${text}`);
      return this.release(h, { delayS, error: text });
    }
    this.log.warn(`lead ${h.id} failed after ${attempt} attempts: ${text}`);
    h.phase = "settling";
    this.completions.add({ held: h, status: "failed", error: text });
  }

  /** Give a lease back, retried while it is surely valid (a repeat finds it given back). A
   * checkpoint no renewal carried yet goes first, so the next holder resumes from it. A lead
   * never started goes back `unstarted`, spending no attempt (a stop cannot fail a lead that
   * never ran); plainly once the service refuses the field. */
  private async release(
    h: Held,
    options: { delayS?: number; error: string; throttleS?: number; unstarted?: boolean },
  ): Promise<void> {
    h.phase = "settling";
    try {
      await this.carryCheckpoint(h);
      for (let retry = 0; ; retry += 1) {
        const unstarted = options.unstarted === true && !this.plainReleases;
        try {
          await this.client.release(h.id, h.lease.token, { ...options, unstarted });
          this.stats.released += 1;
          return this.drop(h);
        } catch (error) {
          if (unstarted && refuses(error, "unstarted")) {
            this.log.warn(`the service counts every release as an attempt (${describe(error)})`);
            this.plainReleases = true;
            continue;
          }
          const delay = backoffS(DEFAULT_RETRY, retry, error instanceof LeaseqError ? error.retryAfterS : undefined);
          if (!(error instanceof Unavailable) || this.clock() + delay >= h.validUntil) {
            const why = error instanceof LeaseLost ? "its lease was lost" : describe(error);
            this.log.warn(`lead ${h.id}: not released (${why})`);
            return this.drop(h, "lost");
          }
          await sleep(delay);
        }
      }
    } finally {
      this.drop(h);
    }
  }

  private async carryCheckpoint(h: Held): Promise<void> {
    const checkpoint = h.checkpoint;
    if (checkpoint === undefined || checkpoint.sent) return;
    try {
      await this.client.renew(h.id, h.lease.token, { ttlS: h.ttlS, checkpoint: checkpoint.value });
      checkpoint.sent = true;
    } catch (error) {
      this.log.warn(`lead ${h.id}: its last checkpoint was not stored: ${describe(error)}`);
    }
  }

  private settled(s: Settlement, confirmed: boolean): void {
    if (confirmed) {
      this.stats[s.status] += 1;
      this.drop(s.held);
    } else {
      this.drop(s.held, "lost");
    }
  }

  /** A lease no longer held: its slot is free. */
  private drop(h: Held, why?: "lost" | "abandoned"): void {
    if (this.held.get(h.lease.token) !== h) return;
    if (why !== undefined) this.stats[why] += 1;
    this.held.delete(h.lease.token);
    h.phase = "settling";
    h.renewAt = Infinity;
    this.changed.notify();
  }

  /** A renewal said the lease is gone: its handler stops; a lease not started is dropped. */
  private lost(h: Held): void {
    if (h.phase === "running") {
      h.interrupt("lost");
    } else if (h.phase === "waiting" || h.phase === "confirming") {
      this.waiting = this.waiting.filter((w) => w !== h);
      this.drop(h, "lost");
    }
  }

  /** Stop every handler whose lease may end soon or whose time is up; drop waiting leases
   * that can no longer be confirmed in time. */
  private checkDeadlines(): void {
    const now = this.clock();
    for (const h of [...this.held.values()]) {
      const reason = h.reason === undefined ? h.due(now, this.options.maxRuntimeS) : undefined;
      if (reason === undefined) continue;
      if (h.phase === "running") {
        h.interrupt(reason);
      } else if (h.phase === "waiting" || h.phase === "confirming") {
        this.waiting = this.waiting.filter((w) => w !== h);
        this.drop(h, "lost");
      }
    }
  }
}

/** A 422 whose `errors` name the body's `field`: a service older than the field. */
function refuses(error: unknown, field: string): boolean {
  if (!(error instanceof ValidationError)) return false;
  const errors = error.problem?.errors;
  return Array.isArray(errors) && errors.some((e) => Array.isArray(e.loc) && e.loc[e.loc.length - 1] === field);
}
