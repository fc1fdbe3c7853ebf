/**
 * Completions, coalesced: handlers that finish close together are completed in one
 * `/complete/batch` that also leases, with `next`, as many leads as the lease slots it
 * frees plus those already free. One batch is in flight at a time; what finishes
 * meanwhile goes in the next, sent as soon as the answer is in, so a lone completion
 * waits for nothing and a busy worker sends one request per batch, not per lead.
 *
 * The batch's `Idempotency-Key` is the same on every retry: a retry after a lost answer
 * gets the same leases, and each completion answers as the first did. A lease stays
 * held (its slot taken) until the answer confirms its completion or says it was lost;
 * a lease answered lost is that lead's alone. A batch is retried while every one of its
 * leases is surely valid; then the service decides (the lease ends, and the sweep puts
 * the lead back).
 */

import type { Client, CompleteItem, LeaseRequest } from "../client.js";
import { LeaseqError, PayloadTooLarge, Unavailable, ValidationError } from "../errors.js";
import { describe } from "../http.js";
import { backoffS, newIdempotencyKey, sleep } from "../retry.js";
import type { FinalStatus, Lease } from "../types.js";
import { MAX_ITEM_BATCH } from "../wire.js";
import type { Held } from "./held.js";


export interface Settlement {
  held: Held;
  status: FinalStatus;
  result?: unknown;
  error?: string | null;
}

export interface CompletionsHost {
  readonly client: Client;
  clock(): number;
  /** What `next` asks for along with a batch of `freed` completions (reserving it), if anything. */
  ask(freed: number): LeaseRequest | undefined;
  /** The leases asked for with `next` are in (or will not come): no longer reserved. */
  asked(ask: LeaseRequest): void;
  /** Leases that came with a batch sent at `sent`. */
  take(leases: Lease[], sent: number, received: number): void;
  /** The batch's answer for one completion: confirmed, or the lease was lost (or could not be
   * confirmed before it ran out). Its lease is no longer held. */
  settled(settlement: Settlement, confirmed: boolean): void;
  /** The service refused this completion's result (too large, not storable): fail it instead. */
  refused(settlement: Settlement, why: string): void;
  /** An error no completion can get past (401, 403): the run ends with it. */
  fatal(error: LeaseqError): void;
  warn(message: string): void;
}

export class Completions {
  private pending: Settlement[] = [];
  private flushing: Promise<void> | undefined;

  constructor(private readonly host: CompletionsHost) {}

  /** Complete this lead with the next batch (sent at once when none is in flight). */
  add(settlement: Settlement): void {
    this.pending.push(settlement);
    // Those finishing in the same turn of the event loop go together.
    this.flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.flush());
  }

  /** Resolves once nothing is pending or in flight. */
  async idle(): Promise<void> {
    while (this.flushing) {
      await this.flushing;
    }
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, MAX_ITEM_BATCH);
        await this.send(batch);
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private async send(batch: Settlement[]): Promise<void> {
    const items: CompleteItem[] = batch.map((s) => ({
      lead_id: s.held.id,
      token: s.held.lease.token,
      status: s.status,
      result: s.result ?? null,
      error: s.error ?? null,
    }));
    const next = this.host.ask(batch.length);
    const key = newIdempotencyKey(); // the same for every retry: they get the same leases
    const sent = this.host.clock(); // the first send: the leases it takes are timed from it
    const validUntil = Math.min(...batch.map((s) => s.held.validUntil));
    let answer: Awaited<ReturnType<Client["completeBatch"]>> | undefined;
    try {
      for (let retry = 0; answer === undefined; retry += 1) {
        try {
          answer = await this.host.client.completeBatch(items, next ? { next, idempotencyKey: key } : {});
        } catch (error) {
          if (error instanceof Unavailable) {
            const delay = backoffS(this.host.client.transport.retry, retry, error.retryAfterS);
            if (this.host.clock() + delay < validUntil) {
              await sleep(delay);
              continue;
            }
            this.host.warn(`${batch.length} completions unconfirmed before their leases ran out: ${describe(error)}`);
            for (const s of batch) {
              this.host.settled(s, false);
            }
            return;
          }
          await this.refusedBatch(batch, error);
          return;
        }
      }
    } finally {
      if (next) {
        this.host.asked(next);
      }
    }
    const received = this.host.clock();
    batch.forEach((s, i) => this.host.settled(s, answer?.results[i]?.ok === true));
    this.host.take(answer.leases, sent, received);
  }

  /** A batch the service refused as a whole: each alone, to find the one it cannot take. */
  private async refusedBatch(batch: Settlement[], error: unknown): Promise<void> {
    if (!(error instanceof ValidationError || error instanceof PayloadTooLarge)) {
      const fatal = error instanceof LeaseqError ? error : new LeaseqError(describe(error), { cause: error });
      for (const s of batch) {
        this.host.settled(s, false);
      }
      this.host.fatal(fatal);
      return;
    }
    if (batch.length === 1) {
      const [only] = batch as [Settlement];
      this.host.refused(only, `the result was refused: ${error.detail}`);
      return;
    }
    for (const s of batch) {
      await this.send([s]);
    }
  }
}
