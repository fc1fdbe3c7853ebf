/**
 * A lease held by a worker, and its time: until when it is surely valid, when to renew
 * it, when its handler must stop. All on the worker's own monotonic clock (seconds),
 * from the instants the worker *sent* its requests and the `ttl_s` the service granted;
 * the service's `expires_at` (its database's clock) is never compared with it:
 *
 * - a lease (or renewal) sent at S with ttl T is surely valid until S + T: the service
 *   took it after S (`validUntil`);
 * - renewals follow a fixed schedule, a third of T after the send time of the last one
 *   confirmed (`renewAt`), however long its answer took; after a failure, again soon;
 * - the handler is told to stop at `stopAt` = validUntil − (kill grace + margin), so it
 *   has its kill grace to end and a margin is left before the lease can end;
 * - a lease whose answer came after its first renewal was due (a long poll that waited,
 *   a slow service) may be older than its send time says: it is renewed at once, and its
 *   handler starts only once that renewal is confirmed (`confirmed`); unconfirmed by its
 *   receipt plus T, it is over.
 */

import type { Lease } from "../types.js";
import type { StopReason } from "./job.js";

export const DEFAULT_KILL_GRACE_S = 2;
const MAX_MARGIN_S = 1;
const RENEW_RETRY_FIRST_S = 0.1;
const RENEW_RETRY_MAX_S = 2;

/** The worker's clock: monotonic seconds, never compared with the service's. */
export function monotonicS(): number {
  return performance.now() / 1000;
}

/** What the stop must come ahead of the lease's end by: timers late, a handler's last step. */
export function safetyMargin(ttlS: number): number {
  return Math.min(MAX_MARGIN_S, ttlS * 0.1);
}

/** The time a stopped handler has to end, for a lease of `ttlS`: `asked`, or 2 s (a tenth of
 * a short ttl); never so much that less than half the ttl is left for renewals. */
export function killGrace(ttlS: number, asked?: number): number {
  const room = Math.max(0, ttlS / 2 - safetyMargin(ttlS));
  const wanted = asked ?? Math.min(DEFAULT_KILL_GRACE_S, ttlS / 10);
  return Math.min(wanted, room);
}

/** Seconds before a failed renewal is tried again: 0.1 s doubling, at most T/20 (≤ 2 s). */
export function renewBackoff(failures: number, ttlS: number): number {
  const cap = Math.max(RENEW_RETRY_FIRST_S, Math.min(RENEW_RETRY_MAX_S, ttlS / 20));
  return Math.min(cap, RENEW_RETRY_FIRST_S * 2 ** Math.max(failures - 1, 0));
}

/** Where a held lease is in its life. */
export type Phase = "confirming" | "waiting" | "running" | "settling";

export class Held {
  lease: Lease;
  ttlS: number;
  validUntil: number;
  renewAt: number;
  renewFailures = 0;
  /** When the answer came, then when the handler started (its maximum runtime counts from it). */
  started: number;
  confirmed: boolean;
  phase: Phase;
  reason: StopReason | undefined;
  readonly killGraceS: number;
  readonly controller = new AbortController();
  /** The newest checkpoint the handler set, and whether a renewal carried it yet. */
  checkpoint: { value: unknown; sent: boolean } | undefined;
  /** Called when the lease is interrupted or confirmed: wakes whatever waits on it. */
  wake: (() => void) | undefined;

  constructor(lease: Lease, sent: number, ttlS: number, received: number, killGraceS?: number) {
    this.lease = lease;
    this.ttlS = ttlS;
    this.validUntil = sent + ttlS;
    this.renewAt = sent + ttlS / 3;
    this.started = received;
    this.confirmed = received < this.renewAt; // fresh: its first renewal is still ahead
    this.phase = this.confirmed ? "waiting" : "confirming";
    this.killGraceS = killGrace(ttlS, killGraceS);
  }

  get id(): number {
    return this.lease.lead.id;
  }

  get margin(): number {
    return safetyMargin(this.ttlS);
  }

  /** When the handler must be told to stop, unless a renewal is confirmed before. */
  get stopAt(): number {
    return this.validUntil - this.killGraceS - this.margin;
  }

  /** An unconfirmed lease has surely ended by then: its answer's receipt plus the ttl. */
  get unconfirmedUntil(): number {
    return this.started + this.ttlS;
  }

  get lost(): boolean {
    return this.reason === "lost" || this.reason === "expired";
  }

  /** Stop the handler (once it runs); losing the lease overrides an earlier reason. */
  interrupt(reason: StopReason): void {
    if (this.reason === undefined || reason === "lost" || reason === "expired") {
      this.reason = reason;
    }
    this.wake?.();
  }

  /** A renewal sent at `sent` was confirmed: valid for its ttl from then (never less). */
  renewed(sent: number, ttlS: number): void {
    this.ttlS = ttlS;
    this.validUntil = Math.max(this.validUntil, sent + ttlS);
    this.renewAt = Math.max(this.renewAt, sent + ttlS / 3);
    this.renewFailures = 0;
    if (!this.confirmed) {
      this.confirmed = true;
      this.wake?.();
    }
  }

  /** A renewal was not confirmed: try again soon. */
  renewFailed(now: number): void {
    this.renewFailures += 1;
    this.renewAt = now + renewBackoff(this.renewFailures, this.ttlS);
  }

  /** Until when a renewal's answer is of use: the stop; settling, the lease's end;
   * unconfirmed, until it has surely ended. */
  neededBy(): number {
    if (!this.confirmed) {
      return this.unconfirmedUntil;
    }
    return this.phase === "settling" ? this.validUntil : this.stopAt;
  }

  /** When the handler must stop at the latest. */
  deadline(maxRuntimeS: number | undefined): number {
    return Math.min(this.stopAt, this.started + (maxRuntimeS ?? Infinity));
  }

  /** Why the handler must stop at `now`: the lease may end soon, or its time is up. */
  due(now: number, maxRuntimeS: number | undefined): StopReason | undefined {
    if (!this.confirmed) {
      return now >= this.unconfirmedUntil ? "expired" : undefined;
    }
    if (now >= this.stopAt) {
      return "expired";
    }
    if (this.phase === "running" && maxRuntimeS !== undefined && now >= this.started + maxRuntimeS) {
      return "max_runtime";
    }
    return undefined;
  }
}
