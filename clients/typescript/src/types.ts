/**
 * The API's objects under the names a worker uses, each taken from the generated
 * document (`openapi.ts`) by its route: what `GET /leads/{id}` answers is a `Lead`,
 * whatever the document names its schema. Requests are built by the client from its
 * own options, so a field with a default may be left out.
 */

import type { paths } from "./openapi.js";

type Json<T> = T extends { content: { "application/json": infer B } } ? B : never;

/** The JSON a route answers with `status`. */
export type Answer<
  P extends keyof paths,
  M extends keyof paths[P],
  S extends number = 200,
> = paths[P][M] extends { responses: infer R } ? (S extends keyof R ? Json<R[S]> : never) : never;

/** The JSON body a route takes. */
export type RequestBody<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  requestBody?: infer B;
}
  ? Json<NonNullable<B>>
  : never;

export type Lead = Answer<"/leads/{lead_id}", "get">;
/** A lease: the lead, its token, attempt, owner, expiry, the ttl granted and its fence. */
export type Lease = Answer<"/lease", "post">["leases"][number] & {
  /** The lease named and signed by the service (`verifyFence`); from services with fences. */
  fence?: string;
};
export type Renewal = Answer<"/renew", "post"> & { fence?: string };
export type ItemResult = Answer<"/renew/batch", "post">["results"][number];
export type PushResult = Answer<"/sessions/{session}/leads", "post", 201>;
export type SweepResult = Answer<"/sweep", "post">;
export type Counts = Answer<"/sessions/{session}/stats", "get">;
export type AllCounts = Answer<"/stats", "get">;
export type Report = Answer<"/sessions/{session}/report", "get">;
export type Settings = Answer<"/sessions/{session}/settings", "get">;
export type Schedule = Answer<"/schedules/{name}", "get">;
/** A scoped token as listed (never the token itself). */
export type ApiToken = Answer<"/tokens", "get">["tokens"][number];
/** A scoped token just made: the only answer that shows `token`. */
export type CreatedToken = Answer<"/tokens", "post", 201>;

/** A lead to push: its payload, and whatever else the push takes. */
export type NewLead = Partial<RequestBody<"/sessions/{session}/leads", "post">["leads"][number]> & {
  payload: Record<string, unknown>;
};
/** A session's settings to store (`putSettings`): what is left out takes its default. */
export type SettingsInput = Partial<RequestBody<"/sessions/{session}/settings", "put">>;
/** What a schedule pushes at each tick. */
export type ScheduleInput = RequestBody<"/schedules/{name}", "put">;
export type FinalStatus = "done" | "failed" | "cached";
export type LeadStatus = "queued" | "leased" | FinalStatus;

/** Where a lease comes from: one session, several (fair share by weight), or any (null). */
export type Sessions = string | readonly string[] | null;

/** `GET /sessions/{session}/leads`: which leads, in what order, how many a page. */
export interface LeadQuery {
  status?: LeadStatus | readonly LeadStatus[];
  key_prefix?: string;
  owner?: string;
  /** A case-insensitive substring of the error text. */
  error?: string;
  created_after?: string;
  created_before?: string;
  updated_after?: string;
  updated_before?: string;
  order?: "newest" | "oldest";
  /** 1–500; the service's default is 50. */
  limit?: number;
  /** From the previous page's `next_cursor`. */
  cursor?: string;
}

export interface LeadPage {
  leads: Lead[];
  next_cursor: string | null;
}

/** Bulk retry or cancel: these ids (at most 1,000), or every lead the filter matches. */
export type LeadSelection = { ids: readonly number[] } | { filter: Omit<LeadQuery, "cursor" | "limit" | "order"> };

export interface BulkResult {
  changed: number;
  /** Leads matching the filter are left: call again until it is false. */
  more: boolean;
}

/** `GET /sessions/{session}/scaling`: how many workers the backlog calls for. */
export interface Scaling {
  session: string;
  backlog: number;
  leased: number;
  oldest_available_age_s: number | null;
  completions_per_s: number;
  suggested_workers: number;
}
