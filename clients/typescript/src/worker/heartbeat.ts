/**
 * The heartbeat: every lease a worker holds renewed on its schedule (`Held.renewAt`),
 * those due within a sixth of their ttl together in one `/renew/batch`. Each call's
 * timeout is what is left before the first of its leases must stop, and the client does
 * not retry it: a retry is the heartbeat's next tick, soon after (`renewBackoff`). A
 * renewal answered lost stops its handler at once; a checkpoint the handler set rides on
 * its lease's next renewal.
 */

import type { Client } from "../client.js";
import { describe } from "../http.js";
import { NO_RETRY } from "../retry.js";
import { MAX_ITEM_BATCH } from "../wire.js";
import type { Held } from "./held.js";

const MIN_CALL_TIMEOUT_S = 0.05;
const LOG_EVERY_S = 5;

export interface HeartbeatHost {
  readonly client: Client;
  clock(): number;
  /** Every lease held. */
  held(): Iterable<Held>;
  /** A renewal answered that this lease is gone. */
  lost(held: Held): void;
  /** Stop whatever must stop by now. */
  checkDeadlines(): void;
  warn(message: string): void;
}

export class Heartbeat {
  private stopped = false;
  private sleepingUntil = -Infinity;
  private wakeUp: (() => void) | undefined;
  private failingSince: number | undefined;
  private lastSaid = -Infinity;

  constructor(private readonly host: HeartbeatHost) {}

  /** A lease due sooner than the heartbeat wakes by itself (a new one, one that came late). */
  due(at: number): void {
    if (at < this.sleepingUntil) {
      this.wakeUp?.();
    }
  }

  stop(): void {
    this.stopped = true;
    this.wakeUp?.();
  }

  /** Renew until stopped. A fault of its own is logged and the beat goes on: the handlers'
   * deadlines do not depend on it, only their leases' renewals do. */
  async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.beat();
      } catch (error) {
        this.host.warn(`the heartbeat failed: ${describe(error)}`);
        await this.sleep(0.1);
      }
    }
  }

  /** Sleep until the next renewal is due, or send the renewals due. */
  private async beat(): Promise<void> {
    const now = this.host.clock();
    const live = [...this.host.held()].filter((h) => !h.lost && h.renewAt < Infinity);
    const nextAt = Math.min(...live.map((h) => h.renewAt));
    if (nextAt > now) {
      await this.sleep(nextAt - now);
      return;
    }
    // Those due within a sixth of their ttl go along: an early renewal costs nothing.
    const batch = live.filter((h) => h.renewAt <= now + h.ttlS / 6);
    const calls: Promise<void>[] = [];
    for (let i = 0; i < batch.length; i += MAX_ITEM_BATCH) {
      calls.push(this.renew(batch.slice(i, i + MAX_ITEM_BATCH)));
    }
    await Promise.all(calls);
    this.host.checkDeadlines();
  }

  private sleep(seconds: number): Promise<void> {
    this.sleepingUntil = this.host.clock() + seconds;
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.min(seconds, 3600) * 1000);
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.wakeUp = undefined;
        self.sleepingUntil = -Infinity;
        resolve();
      }
      this.wakeUp = done;
    });
  }

  /** Renew `batch` in one call, timed out before the first of them must stop. */
  private async renew(batch: Held[]): Promise<void> {
    const sent = this.host.clock();
    const remaining = Math.min(...batch.map((h) => h.neededBy())) - sent;
    const timeoutS = Math.min(Math.max(remaining, MIN_CALL_TIMEOUT_S), this.host.client.transport.timeoutS);
    const carried = batch.map((h) => (h.checkpoint && !h.checkpoint.sent ? h.checkpoint : undefined));
    const items = batch.map((h, i) => ({
      lead_id: h.id,
      token: h.lease.token,
      ttl_s: h.ttlS,
      ...(carried[i] ? { checkpoint: carried[i]?.value } : {}),
    }));
    let results;
    try {
      results = await this.host.client.renewBatch(items, { timeoutS, retry: NO_RETRY });
    } catch (error) {
      const now = this.host.clock();
      for (const h of batch) {
        h.renewFailed(now);
      }
      this.failingSince ??= now;
      if (now - this.lastSaid >= LOG_EVERY_S) {
        this.lastSaid = now;
        const why = describe(error);
        const failing = (now - this.failingSince).toFixed(1);
        this.host.warn(`renewal of ${batch.length} leases failing for ${failing}s (${why}); retrying while time remains`);
      }
      return;
    }
    this.failingSince = undefined;
    batch.forEach((h, i) => {
      const answer = results[i];
      if (answer?.ok) {
        h.renewed(sent, answer.ttl_s ?? h.ttlS);
        if (answer.fence !== undefined) {
          h.lease.fence = answer.fence;
        }
        const checkpoint = carried[i];
        if (checkpoint && h.checkpoint === checkpoint) {
          checkpoint.sent = true;
        }
      } else if (h.phase === "settling") {
        h.renewAt = Infinity; // its completion or release will hear that it is lost
      } else {
        this.host.lost(h);
      }
    });
  }
}
