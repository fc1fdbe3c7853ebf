/**
 * `Client`: every route of the leaseq REST API, one method each, answering the JSON
 * the document describes (`types.ts`). Errors are thrown as the class of their
 * problem code (`errors.ts`); connection errors, 502, 503 and 504 are retried first
 * (`retry.ts`).
 *
 * A retry never turns one intent into two effects: push, lease and a completion with
 * `next` carry an `Idempotency-Key` (the caller's, or a fresh one) that every retry
 * repeats, so the service answers a repeat with the first answer; the other calls are
 * safe to repeat as they are (a renewal extends again, a completion answers as the
 * first did, a release or cancel finds the work done and changes nothing).
 */

import { NotFound } from "./errors.js";
import { type Call, IDEMPOTENCY_HEADER, Transport, type TransportOptions } from "./http.js";
import { NO_RETRY, type RetryPolicy, newIdempotencyKey } from "./retry.js";
import {
  type CompleteItem,
  type LeaseRequest,
  type RenewItem,
  completeBody,
  leadPath,
  leaseBody,
  pushChunks,
  query,
  renewBody,
  seg,
} from "./wire.js";
import type {
  AllCounts,
  ApiToken,
  CreatedToken,
  BulkResult,
  Counts,
  FinalStatus,
  ItemResult,
  Lead,
  LeadPage,
  LeadQuery,
  LeadSelection,
  Lease,
  NewLead,
  PushResult,
  Renewal,
  Report,
  Scaling,
  Schedule,
  ScheduleInput,
  Settings,
  SettingsInput,
  SweepResult,
} from "./types.js";

/** The longest long poll (`waitS`) of a lease or of waiting on a lead. */
export const MAX_WAIT_S = 30;

export type ClientOptions = TransportOptions;
export type { CompleteItem, LeaseRequest, RenewItem };

export interface LeaseOptions {
  /** Sent with every retry, so a repeat gets the leases the first try took; fresh when left out. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface CompleteOptions extends LeaseOptions {
  /** Lease in the same request, after the completion (one request per lead at steady state). */
  next?: LeaseRequest;
}

export interface ReleaseOptions {
  /** Seconds before the lead may be leased again. */
  delayS?: number;
  /** Why (kept when the release fails the lead on its last attempt). */
  error?: string;
  /** "The upstream throttles us": the whole session pauses this long; no attempt is used up. */
  throttleS?: number;
  /** The lead was never started (it was prefetched): this lease uses up no attempt, so the
   * release cannot fail the lead. */
  unstarted?: boolean;
}

/** The leaseq REST API. `new Client("http://127.0.0.1:8000", { token })`. */
export class Client {
  readonly transport: Transport;

  constructor(url: string, options: ClientOptions = {}) {
    this.transport = new Transport(url, options);
  }

  get url(): string {
    return this.transport.url;
  }

  private send<T>(call: Call): Promise<T> {
    return this.transport.send<T>(call);
  }

  // -- producers ------------------------------------------------------------

  /**
   * Queue leads; ids come back in input order (a lead whose `key` the session has already
   * stands for the existing one). Sent in calls of up to 1,000 leads and 1 MiB, each atomic
   * and keyed (`idempotencyKey`, `.1`, `.2` … after the first call), so a retry pushes once.
   * Throws `QuotaExceeded` (with `retryAfterS`) when the session is full: nothing of that
   * call was stored.
   */
  async push(
    session: string,
    leads: readonly NewLead[],
    options: { idempotencyKey?: string; traceparent?: string; signal?: AbortSignal } = {},
  ): Promise<PushResult> {
    const key = options.idempotencyKey ?? newIdempotencyKey();
    const result: PushResult = { ids: [], created: 0, duplicates: 0 };
    const calls = pushChunks(leads);
    for (const [n, chunk] of calls.entries()) {
      const headers: Record<string, string> = { [IDEMPOTENCY_HEADER]: n === 0 ? key : `${key}.${n}` };
      if (options.traceparent !== undefined) {
        headers.traceparent = options.traceparent;
      }
      const path = `/sessions/${seg(session)}/leads`;
      const answer = await this.send<PushResult>({
        method: "POST",
        path,
        body: { leads: chunk },
        headers,
        ...(options.signal ? { signal: options.signal } : {}),
      });
      result.ids.push(...answer.ids);
      result.created += answer.created;
      result.duplicates += answer.duplicates;
    }
    return result;
  }

  /**
   * What the push into `session` sent with `idempotencyKey` answered (its lead ids), or null
   * when no such push was stored: then it may be sent again under the same key. For a
   * producer whose push threw `Unavailable` after its retries: the answers were lost, not
   * necessarily the push. A push of several calls has one key per call (`key`, `key.1` …);
   * a push still running is seen once it commits.
   */
  async getPush(session: string, idempotencyKey: string, options: { signal?: AbortSignal } = {}): Promise<PushResult | null> {
    try {
      return await this.send<PushResult>({
        method: "GET",
        path: `/sessions/${seg(session)}/pushes/${seg(idempotencyKey)}`,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (error instanceof NotFound) return null;
      throw error;
    }
  }

  // -- workers --------------------------------------------------------------

  /** Lease up to `max` leads; an empty list when none came in `waitS`. Keyed: a retry gets
   * the leases the first try took. */
  async lease(ask: LeaseRequest, options: LeaseOptions = {}): Promise<Lease[]> {
    const answer = await this.send<{ leases: Lease[] }>({
      method: "POST",
      path: "/lease",
      body: leaseBody(ask),
      headers: { [IDEMPOTENCY_HEADER]: options.idempotencyKey ?? newIdempotencyKey() },
      timeoutS: this.transport.timeoutS + (ask.waitS ?? 0),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    return answer.leases;
  }

  /** Extend a valid lease by `ttlS` from now (the service's default when left out); throws
   * `LeaseLost`. A `checkpoint` (any JSON) is stored on the lead for its next holder. */
  renew(leadId: number, token: string, options: { ttlS?: number; checkpoint?: unknown } = {}): Promise<Renewal> {
    const body = renewBody({ lead_id: leadId, token, ttl_s: options.ttlS, checkpoint: options.checkpoint });
    return this.send<Renewal>({ method: "POST", path: "/renew", body });
  }

  /** Renew up to 100 leases in one call; one result per item, in order (`ok: false`, with a
   * `code`, for a lease lost). */
  async renewBatch(
    items: readonly RenewItem[],
    options: { timeoutS?: number; retry?: Readonly<RetryPolicy>; signal?: AbortSignal } = {},
  ): Promise<(ItemResult & { fence?: string; ttl_s?: number | null })[]> {
    const answer = await this.send<{ results: (ItemResult & { fence?: string })[] }>({
      method: "POST",
      path: "/renew/batch",
      body: { items: items.map(renewBody) },
      ...options,
    });
    return answer.results;
  }

  /**
   * Finish a valid lease as done (default), failed or cached; throws `LeaseLost`. Safe to
   * retry: the same completion again answers as the first. With `next`, it leases in the
   * same request, keyed so that a retry gets the same leases.
   */
  async complete(
    leadId: number,
    token: string,
    status: FinalStatus = "done",
    options: CompleteOptions & { result?: unknown; error?: string | null } = {},
  ): Promise<{ lead: Lead; leases: Lease[] }> {
    const body: Record<string, unknown> = completeBody({
      lead_id: leadId,
      token,
      status,
      result: options.result,
      error: options.error,
    });
    const answer = await this.send<{ lead: Lead; leases?: Lease[] }>(this.leasing("/complete", body, options));
    return { lead: answer.lead, leases: answer.leases ?? [] };
  }

  /** Complete up to 100 leases in one call (one result per item, in order), and with `next`
   * lease in the same request, whatever the items' answers; keyed as `complete`. */
  async completeBatch(
    items: readonly CompleteItem[],
    options: CompleteOptions & { timeoutS?: number } = {},
  ): Promise<{ results: ItemResult[]; leases: Lease[] }> {
    const body = { items: items.map(completeBody) };
    const call = this.leasing("/complete/batch", body, options);
    if (options.timeoutS !== undefined) {
      call.timeoutS = options.timeoutS + (options.next?.waitS ?? 0);
    }
    const answer = await this.send<{ results: ItemResult[]; leases?: Lease[] }>(call);
    return { results: answer.results, leases: answer.leases ?? [] };
  }

  private leasing(path: string, body: Record<string, unknown>, options: CompleteOptions): Call {
    const call: Call = { method: "POST", path, body };
    if (options.next !== undefined) {
      body.next = leaseBody(options.next);
      call.headers = { [IDEMPOTENCY_HEADER]: options.idempotencyKey ?? newIdempotencyKey() };
      call.timeoutS = this.transport.timeoutS + (options.next.waitS ?? 0);
    }
    if (options.signal) {
      call.signal = options.signal;
    }
    return call;
  }

  /** Give a valid lease back: queued again after `delayS` (failed on its last attempt, with
   * `error`). Throws `LeaseLost`; a retry after a lost answer finds the lease gone. */
  release(leadId: number, token: string, options: ReleaseOptions = {}): Promise<Lead> {
    const body: Record<string, unknown> = { lead_id: leadId, token, delay_s: options.delayS ?? 0 };
    if (options.error !== undefined) {
      body.error = options.error;
    }
    if (options.throttleS !== undefined) {
      body.throttle_s = options.throttleS;
    }
    if (options.unstarted === true) {
      body.unstarted = true;
    }
    return this.send<{ lead: Lead }>({ method: "POST", path: "/release", body }).then((a) => a.lead);
  }

  // -- operators ------------------------------------------------------------

  /** Requeue expired leases of `session`, or of every session when it is left out. */
  sweep(session?: string): Promise<SweepResult> {
    const body = session ? { session } : { all: true };
    return this.send({ method: "POST", path: "/sweep", body });
  }

  /** Fail a queued or leased lead with error `cancelled`; throws `NotFound` or `Conflict`. */
  cancel(leadId: number): Promise<Lead> {
    return this.send({ method: "POST", path: `${leadPath(leadId)}/cancel` });
  }

  /** Queue a failed lead again (dead-letter replay); throws `NotFound` or `Conflict`. */
  retry(leadId: number): Promise<Lead> {
    return this.send({ method: "POST", path: `${leadPath(leadId)}/retry` });
  }

  /** Queue every failed lead of a session again; how many. */
  async retryFailed(session: string): Promise<number> {
    const answer = await this.send<{ requeued: number }>({
      method: "POST",
      path: `/sessions/${seg(session)}/retry-failed`,
    });
    return answer.requeued;
  }

  /** One page of a session's leads, newest first unless `order: "oldest"`. */
  listLeads(session: string, filter: LeadQuery = {}): Promise<LeadPage> {
    return this.send({ method: "GET", path: `/sessions/${seg(session)}/leads${query({ ...filter })}` });
  }

  /** Every lead of a session the query matches, page after page. */
  async *leads(session: string, filter: Omit<LeadQuery, "cursor"> = {}): AsyncGenerator<Lead> {
    let cursor: string | undefined;
    do {
      const page = await this.listLeads(session, cursor === undefined ? filter : { ...filter, cursor });
      yield* page.leads;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Retry failed leads by id or filter, at most 10,000 a call: repeat while `more`. */
  retryLeads(session: string, which: LeadSelection): Promise<BulkResult> {
    return this.send({ method: "POST", path: `/sessions/${seg(session)}/leads/retry`, body: which });
  }

  /** Cancel queued or leased leads by id or filter, at most 10,000 a call: repeat while `more`. */
  cancelLeads(session: string, which: LeadSelection): Promise<BulkResult> {
    return this.send({ method: "POST", path: `/sessions/${seg(session)}/leads/cancel`, body: which });
  }

  /** How many workers would keep the session's oldest lead waiting at most `targetWaitS`. */
  scaling(session: string, options: { targetWaitS?: number } = {}): Promise<Scaling> {
    const q = query({ target_wait_s: options.targetWaitS });
    return this.send({ method: "GET", path: `/sessions/${seg(session)}/scaling${q}` });
  }

  settings(session: string): Promise<Settings> {
    return this.send({ method: "GET", path: `/sessions/${seg(session)}/settings` });
  }

  /** Replace a session's settings (what is left out takes its default); as stored. */
  putSettings(session: string, settings: SettingsInput): Promise<Settings> {
    return this.send({ method: "PUT", path: `/sessions/${seg(session)}/settings`, body: settings });
  }

  /** No lease of the session begins for `forS` seconds (until resumed when left out). */
  pause(session: string, forS?: number): Promise<Settings> {
    const body = forS === undefined ? {} : { for_s: forS };
    return this.send({ method: "POST", path: `/sessions/${seg(session)}/pause`, body });
  }

  resume(session: string): Promise<Settings> {
    return this.send({ method: "POST", path: `/sessions/${seg(session)}/resume` });
  }

  putSchedule(name: string, schedule: ScheduleInput): Promise<Schedule> {
    return this.send({ method: "PUT", path: `/schedules/${seg(name)}`, body: schedule });
  }

  schedule(name: string): Promise<Schedule> {
    return this.send({ method: "GET", path: `/schedules/${seg(name)}` });
  }

  async schedules(): Promise<Schedule[]> {
    return (await this.send<{ schedules: Schedule[] }>({ method: "GET", path: "/schedules" })).schedules;
  }

  async deleteSchedule(name: string): Promise<void> {
    await this.send({ method: "DELETE", path: `/schedules/${seg(name)}` });
  }

  // -- reading --------------------------------------------------------------

  /** One lead; with `waitS` (0–30) the service holds the call until it is terminal. */
  getLead(leadId: number, options: { waitS?: number; signal?: AbortSignal } = {}): Promise<Lead> {
    const waitS = options.waitS ?? 0;
    return this.send({
      method: "GET",
      path: leadPath(leadId) + query({ wait_s: waitS > 0 ? waitS : undefined }),
      timeoutS: this.transport.timeoutS + waitS,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  /** The lead once it is done, failed or cached, or as it is after `timeoutS`: calls of at
   * most 30 s each, so none outlasts a proxy's idle timeout. */
  async waitFor(leadId: number, timeoutS: number = MAX_WAIT_S): Promise<Lead> {
    const deadline = Date.now() + timeoutS * 1000;
    for (;;) {
      const waitS = Math.round(Math.min(MAX_WAIT_S, Math.max(0, deadline - Date.now()) / 1000) * 1000) / 1000;
      const lead = await this.getLead(leadId, { waitS });
      if (["done", "failed", "cached"].includes(lead.status) || Date.now() >= deadline) {
        return lead;
      }
    }
  }

  stats(session: string): Promise<Counts> {
    return this.send({ method: "GET", path: `/sessions/${seg(session)}/stats` });
  }

  statsAll(): Promise<AllCounts> {
    return this.send({ method: "GET", path: "/stats" });
  }

  /** The ledger's audit of a session (`double_completions` and `overlapping_leases` are 0). */
  report(session: string): Promise<Report> {
    return this.send({ method: "GET", path: `/sessions/${seg(session)}/report` });
  }

  metrics(): Promise<string> {
    return this.send({ method: "GET", path: "/metrics", text: true });
  }

  // -- tokens ---------------------------------------------------------------

  /** A scoped token, shown in this answer only: never retried (a lost answer's token is gone). */
  createToken(
    role: string,
    sessions: string,
    options: { name?: string; expiresS?: number } = {},
  ): Promise<CreatedToken> {
    const body = { role, sessions, name: options.name ?? null, expires_s: options.expiresS ?? null };
    return this.send({ method: "POST", path: "/tokens", body, retry: NO_RETRY });
  }

  async tokens(): Promise<ApiToken[]> {
    return (await this.send<{ tokens: ApiToken[] }>({ method: "GET", path: "/tokens" })).tokens;
  }

  revokeToken(name: string): Promise<ApiToken> {
    return this.send({ method: "DELETE", path: `/tokens/${seg(name)}` });
  }

  tokenSelf(): Promise<Record<string, unknown>> {
    return this.send({ method: "GET", path: "/tokens/self" });
  }

  /** True while the service's process answers; never retried, never throws. */
  healthz(): Promise<boolean> {
    return this.probe("/healthz");
  }

  /** True when the service's database answers at the newest schema; never throws. */
  readyz(): Promise<boolean> {
    return this.probe("/readyz");
  }

  private async probe(path: string): Promise<boolean> {
    try {
      await this.send({ method: "GET", path, retry: NO_RETRY });
      return true;
    } catch {
      return false;
    }
  }
}
