/**
 * The REST API's requests as the service takes them: bodies, paths and queries, and a
 * push cut into calls. Knows nothing of how they travel (`http.ts`).
 */

import type { FinalStatus, NewLead, Sessions } from "./types.js";

/** The most of a push in one call, by count and (the service's default) by body size. */
export const MAX_PUSH_BATCH = 1000;
export const MAX_BODY_BYTES = 1024 * 1024;
/** The most items of one /renew/batch or /complete/batch, and the most leases of one lease. */
export const MAX_ITEM_BATCH = 100;

/** What to lease: from where, for whom, how many, for how long, how long to wait for work. */
export interface LeaseRequest {
  /** One session, several (the one furthest below its fair share), or null: any session. */
  session: Sessions;
  owner: string;
  /** 1–100 (default 1). */
  max?: number;
  /** 1–3600; the service's `LEASEQ_LEASE_TTL_S` when left out. Each lease says what it got. */
  ttlS?: number;
  /** 0–30: hold the request until work comes or the wait ends (default 0). */
  waitS?: number;
}

export interface RenewItem {
  lead_id: number;
  token: string;
  ttl_s?: number;
  checkpoint?: unknown;
}

export interface CompleteItem {
  lead_id: number;
  token: string;
  status?: FinalStatus;
  result?: unknown;
  error?: string | null;
}

/** The body of /lease, and of a completion's `next`. */
export function leaseBody(ask: LeaseRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { owner: ask.owner, max: ask.max ?? 1, wait_s: ask.waitS ?? 0 };
  if (typeof ask.session === "string") {
    body.session = ask.session;
  } else if (ask.session !== null) {
    body.sessions = [...ask.session];
  }
  if (ask.ttlS !== undefined) {
    body.ttl_s = ask.ttlS;
  }
  return body;
}

export function seg(value: string): string {
  return encodeURIComponent(value);
}

export function leadPath(id: number): string {
  if (!Number.isSafeInteger(id)) {
    throw new TypeError(`a lead id is an integer, not ${String(id)}`);
  }
  return `/leads/${id}`;
}

export function query(params: Record<string, unknown>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const each of Array.isArray(value) ? value : [value]) {
      if (each !== undefined && each !== null) {
        search.append(name, String(each));
      }
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function renewBody(item: RenewItem): Record<string, unknown> {
  const body: Record<string, unknown> = { lead_id: item.lead_id, token: item.token };
  if (item.ttl_s !== undefined) {
    body.ttl_s = item.ttl_s;
  }
  if (item.checkpoint !== undefined) {
    body.checkpoint = item.checkpoint;
  }
  return body;
}

export function completeBody(item: CompleteItem): Record<string, unknown> {
  return {
    lead_id: item.lead_id,
    token: item.token,
    status: item.status ?? "done",
    result: item.result ?? null,
    error: item.error ?? null,
  };
}

/** The leads in calls of at most 1,000 leads and 1 MiB of body each; a lead too large for any
 * body goes alone, for the service to refuse (413). */
export function pushChunks(leads: readonly NewLead[]): NewLead[][] {
  const envelope = '{"leads":[]}'.length;
  const chunks: NewLead[][] = [];
  let chunk: NewLead[] = [];
  let size = envelope;
  for (const lead of leads) {
    const bytes = Buffer.byteLength(JSON.stringify(lead));
    if (chunk.length && (chunk.length === MAX_PUSH_BATCH || size + 1 + bytes > MAX_BODY_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      size = envelope;
    }
    size += bytes + (chunk.length ? 1 : 0); // the comma before it
    chunk.push(lead);
  }
  if (chunk.length) {
    chunks.push(chunk);
  }
  return chunks;
}
