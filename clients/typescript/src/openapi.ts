/**
 * The leaseq REST API's types, generated from the service's OpenAPI document
 * (GET /openapi.json) by openapi-typescript. Do not edit: run
 * `npm run generate -- http://127.0.0.1:8000/openapi.json` against a service instead.
 */

export interface paths {
    "/sessions/{session}/leads": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Leads
         * @description A page of the session's leads, filtered, newest first unless `order=oldest`. Paging
         *     by `next_cursor` never shows a lead twice nor skips one, however many are pushed
         *     meanwhile; a cursor given with another filter, order or session is refused (422).
         */
        get: operations["listLeads"];
        put?: never;
        /**
         * Push
         * @description Queue up to 1000 leads. A lead whose `key` is already in the session is not pushed
         *     again: its existing id stands in its place and it counts as a duplicate.
         *
         *     With an `Idempotency-Key`, the same push sent again (its answer was lost) gets the
         *     first answer and pushes nothing; the key sent with another request is refused (422).
         *
         *     A `traceparent` header (W3C Trace Context) is stored on every lead without its own; a
         *     malformed one is ignored.
         *
         *     A push that would leave more of the session's leads queued than its `max_queued` (or
         *     the service's `LEASEQ_MAX_QUEUED`) answers 429 `quota_exceeded` with `Retry-After`, and
         *     stores none of its leads (docs/beyond.md#backpressure).
         */
        post: operations["push"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/pushes/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Pushed
         * @description The answer of the push into the session sent with this `Idempotency-Key`: its lead
         *     ids, as the push answered them. 404 when no push of the session committed with that key
         *     (or the key was forgotten: kept `LEASEQ_IDEMPOTENCY_TTL_S` at least).
         *
         *     A producer whose push's answers were all lost (its retries ran out) asks this before it
         *     moves on: the push was stored, or it was not and may be sent again with the same key.
         */
        get: operations["getPush"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/lease": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Lease
         * @description Lease up to `max` available leads of the session, highest priority then oldest.
         *
         *     With `sessions` instead of `session` (or neither: any session), the leads come from
         *     the one of them, with a lead available, that is furthest below its fair share: its
         *     leases, recently, over its `weight`. A session held back by its `max_leased` or
         *     `rate_per_s` is skipped. The list is empty when nothing is available. With `wait_s`
         *     > 0 the request is held until work arrives in the session (any of them) or the wait
         *     ends (no busy polling). Each lease says the `ttl_s` granted (`LEASEQ_LEASE_TTL_S`
         *     when none is asked), and its lead the `checkpoint` its last holder left. With an
         *     `Idempotency-Key`, the same request sent again gets the leases the first one took
         *     (those still valid), never new ones.
         */
        post: operations["lease"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Renew
         * @description Extend a valid lease to now + `ttl_s` on the database clock (`LEASEQ_LEASE_TTL_S` when
         *     none is asked); the answer says the `ttl_s` granted. 409 `lease_lost` otherwise. A
         *     `checkpoint` is stored on the lead, for the next holder should this one lose it.
         */
        post: operations["renew"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/renew/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Renew Batch
         * @description Renew up to 100 leases; one result per item, in the order given. An item's `checkpoint`
         *     is stored on its lead. Every item is checked before any is renewed.
         */
        post: operations["renewBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/complete": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Complete
         * @description Finish a valid lease as `done`, `failed` or `cached`; 409 `lease_lost` otherwise
         *     (and nothing is leased).
         *
         *     Idempotent: the same lead, token and status again after it succeeded (a retry whose
         *     answer was lost) answers 200 with the lead as finished, and changes nothing; any other
         *     completion of a finished lead is `lease_lost`.
         *
         *     With `next` (the body of `/lease`), once the completion is done the same request leases
         *     too, and the answer's `leases` hold what it took: a worker at steady state sends one
         *     request per lead. `next` is checked before anything changes. The `Idempotency-Key`
         *     stands for that lease, as on `/lease`: sent again, the request gets the leases the first
         *     took (those still valid).
         */
        post: operations["complete"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/complete/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Complete Batch
         * @description Complete up to 100 leases; one result per item, in the order given.
         *     An item its lease already completed with the same status is `ok` again, as for `/complete`.
         *
         *     With `next` (the body of `/lease`), once the completion is done the same request leases
         *     too, and the answer's `leases` hold what it took: a worker at steady state sends one
         *     request per lead. `next` is checked before anything changes. The `Idempotency-Key`
         *     stands for that lease, as on `/lease`: sent again, the request gets the leases the first
         *     took (those still valid).
         */
        post: operations["completeBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Release
         * @description Give a valid lease back: the lead is queued again after `delay_s`. On its last
         *     attempt (`attempts` reached `max_attempts`) it fails instead, its error saying so
         *     (and carrying `error`, the holder's reason, when given). With `throttle_s` (a cooldown:
         *     "the upstream answered 429") the lead is queued whatever its attempt, this lease does
         *     not count against `max_attempts`, and the whole session pauses until now + `throttle_s`.
         *     With `unstarted` (the holder never started the lead: it was prefetched) this lease does
         *     not count against `max_attempts` either, and nothing pauses.
         *
         *     409 `lease_lost` when the lease is no longer valid.
         */
        post: operations["release"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sweep": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Sweep
         * @description Requeue expired leases of one session (`{"session": "s"}`) or of all (`{"all": true}`);
         *     a lead that reached `max_attempts` becomes `failed` instead. A scoped token's sweep of
         *     all touches only its own sessions.
         */
        post: operations["sweep"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/stats": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Session Stats
         * @description Lead counts by status in one session; pending = queued + leased;
         *     `oldest_available_age_s`, the age of its oldest lead that could be leased now (null when
         *     none): the signal to scale workers on.
         */
        get: operations["getSessionStats"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/stats": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Stats
         * @description Lead counts per session, and their total; each with `oldest_available_age_s`. A scoped
         *     token sees only its own sessions, and their total.
         */
        get: operations["getStats"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/scaling": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Scaling
         * @description The signal to scale the session's workers on: its backlog, the leads it holds, the age
         *     of its oldest available lead, its completions per second over the last minute, and the
         *     workers that would finish its backlog within `target_wait_s` (docs/beyond.md). The
         *     shape KEDA's metrics-api scaler reads. Cheap: no read scans the backlog.
         */
        get: operations["getScaling"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/scaling": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Scaling All
         * @description The signal of every session with leads, and of the fleet (`total`, session `*`): one
         *     pool of workers leasing from all of them. A scoped token sees only its own sessions,
         *     and their total.
         */
        get: operations["getScalingAll"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/settings": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Settings
         * @description The session's `weight`, `max_leased`, `rate_per_s` and `burst` (the defaults, weight 1
         *     and no limits, for a session never set).
         */
        get: operations["getSettings"];
        /**
         * Put Settings
         * @description Set the session's weight in a lease across sessions, its cap on leads leased at once
         *     (`max_leased`) and its rate of leases granted (`rate_per_s`, `burst`: a token bucket on
         *     the database clock); a field left out takes its default, `null` is no limit. It binds
         *     every lease that begins after it answers, through every API process.
         */
        put: operations["putSettings"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Pause
         * @description Pause the session: no lease of it begins until `for_s` seconds from now (database
         *     clock), or until resumed without it. Leases held go on. It binds every lease that begins
         *     after it answers, through every API process. Answers the settings, with `paused_until`.
         *     A browser's cross-site request (the body is optional) is refused 403.
         */
        post: operations["pause"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Resume
         * @description End the session's pause (an operator's or a throttled release's); its waiting leases
         *     wake. Answers the settings.
         */
        post: operations["resume"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/report": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Report
         * @description The session's audit, read from the `lead_events` ledger: completions, double
         *     completions, overlapping leases and wasted attempts (all zero with the ledger off).
         */
        get: operations["getReport"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/leads/{lead_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Lead
         * @description One lead (its lease token is never shown); 404 for a lead of a session not the token's,
         *     as if it did not exist.
         *
         *     With `wait_s` > 0 the request is held until the lead is terminal (`done`, `failed` or
         *     `cached`) or the wait ends, then answers the lead as it is: a waiter wakes on the
         *     notification of its lead's end, through whichever API process ended it, and holds no
         *     database connection meanwhile. Beyond `LEASEQ_MAX_OUTCOME_WAITERS` held in one process,
         *     a lead not yet ended answers 503.
         */
        get: operations["getLead"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/leads/{lead_id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Cancel Lead
         * @description A queued or leased lead becomes `failed` with error `cancelled`; its holder's next
         *     renew or complete gets 409 `lease_lost`. A finished lead answers 409 `conflict`.
         */
        post: operations["cancelLead"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/leads/{lead_id}/retry": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retry Lead
         * @description Queue a `failed` lead again (dead-letter replay); any other status answers 409 `conflict`.
         */
        post: operations["retryLead"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/leads/{lead_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Lead Events
         * @description The lead and its ledger, read at one instant: every event in the order written (push,
         *     each lease with its attempt and owner, release, expiry, completion, cancel, retry), each at
         *     the database clock's time. Renewals write none. Empty with the ledger off.
         */
        get: operations["getLeadEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/retry-failed": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retry Failed
         * @description Queue every `failed` lead of the session again, as `POST /leads/{id}/retry` does each
         *     (dead-letter replay: the next lease of each is a new attempt); answers how many. A lead
         *     that fails while it runs is left for the next call. No body; refuses a browser's
         *     cross-site request (403).
         */
        post: operations["retryFailed"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/schedules/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Schedule
         * @description One schedule, with its `next_tick`; 404 for a schedule of a session not the token's,
         *     as if it did not exist.
         */
        get: operations["getSchedule"];
        /**
         * Put Schedule
         * @description Create or replace a schedule: at each tick of `cron` in `timezone` (judged on the
         *     database clock), one lead is pushed into `session` with the key `schedule:{name}:{tick}`
         *     (the tick in RFC 3339 UTC), however many API processes run. A tick missed while no
         *     process ran is pushed once when one starts (only the latest). Answers the schedule with
         *     its `next_tick`; a bad cron expression or time zone answers 422 and stores nothing.
         */
        put: operations["putSchedule"];
        post?: never;
        /**
         * Delete Schedule
         * @description Stop a schedule; the leads it pushed stay. 404 when there is none of that name; 403
         *     for a schedule of a session not the token's.
         */
        delete: operations["deleteSchedule"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/schedules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Schedules
         * @description Every schedule, by name, each with its `next_tick`; for a scoped token, those of its
         *     own sessions only.
         */
        get: operations["listSchedules"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Metrics
         * @description Prometheus text format: the counters of every server process, and lead counts, the
         *     signal to scale on and each session's lease seconds of the last minute read from the
         *     database now (left out while it does not answer); for a scoped token, those of its own
         *     sessions only.
         */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/dashboard": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Dashboard
         * @description The operator's page. It holds no data and no secret, so it is served without a token;
         *     its script asks for the token once and polls `/dashboard/data` with it.
         */
        get: operations["getDashboard"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/dashboard/data": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Dashboard Data
         * @description What the dashboard shows: per session its counts, oldest available lead, settings,
         *     completions per minute, share of the workers' time over the last minute and suggested
         *     workers; the leases closest to expiry; the latest failures; the schedules
         *     with their next ticks. With `search`, only the sessions whose name holds it (in any
         *     case). A scoped token sees its own sessions only; `access` says what the page may offer
         *     it (`operate`: cancel and retry).
         */
        get: operations["getDashboardData"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/leads/retry": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retry Leads
         * @description Queue the session's `failed` leads among `ids`, or those `filter` selects, again, as
         *     `POST /leads/{id}/retry` does each (and writes each in the ledger); a lead in another
         *     status is left as it is and not counted.
         */
        post: operations["retryLeads"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/leads/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Cancel Leads
         * @description Fail the session's `queued` and `leased` leads among `ids`, or those `filter` selects,
         *     with error `cancelled`, as `POST /leads/{id}/cancel` does each: a holder's next renew or
         *     complete gets 409 `lease_lost`. A finished lead is left as it is and not counted.
         */
        post: operations["cancelLeads"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session}/throughput": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Throughput
         * @description The session's leads finished and failed per minute over the last hour, each counted
         *     in the minute of its last change with its present status (what the dashboard draws on a
         *     session's page). It reads the leads finished in the hour only, on the session's shard.
         */
        get: operations["getThroughput"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Tokens
         * @description Every token, newest first: names, roles, patterns, expiry, last use; never a token.
         */
        get: operations["listTokens"];
        put?: never;
        /**
         * Create Token
         * @description Create a scoped token; the answer holds it, once. 422 for a malformed pattern, an
         *     unknown role, or a name a live token has.
         */
        post: operations["createToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tokens/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Revoke Token
         * @description Revoke the live token of this name, in every API process at once.
         */
        delete: operations["revokeToken"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tokens/self": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Own Token
         * @description Whom the token sent acts as: its name, role and sessions, and what it may offer.
         */
        get: operations["getOwnToken"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Health
         * @description 200 while the process runs.
         */
        get: operations["getHealth"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Readiness
         * @description 200 when the database answers, the schema is at head and boot recovery is done; else 503.
         */
        get: operations["getReadiness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** AfterKeyIn */
        AfterKeyIn: {
            /** Key */
            key: string;
        };
        /** AllScalingOut */
        AllScalingOut: {
            /** Sessions */
            sessions: {
                [key: string]: components["schemas"]["ScalingOut"];
            };
            /** @description The fleet: one pool of workers for every session. */
            total: components["schemas"]["ScalingOut"];
        };
        /** AllStatsOut */
        AllStatsOut: {
            /** Sessions */
            sessions: {
                [key: string]: components["schemas"]["CountsOut"];
            };
            total: components["schemas"]["CountsOut"];
        };
        /** BatchOut */
        BatchOut: {
            /** Results */
            results: components["schemas"]["ItemOut"][];
        };
        /** BulkOut */
        BulkOut: {
            /**
             * Changed
             * @description Leads changed; those in another status are not counted.
             */
            changed: number;
            /**
             * More
             * @description Leads the filter selects may be left (a call changes at most 10,000): call again until false.
             */
            more: boolean;
        };
        /**
         * ByFilter
         * @description The leads the filter selects.
         */
        ByFilter: {
            filter: components["schemas"]["LeadFilterIn"];
        };
        /**
         * ByIds
         * @description These leads.
         */
        ByIds: {
            /** Ids */
            ids: number[];
        };
        /** CompleteBatchIn */
        CompleteBatchIn: {
            /** Items */
            items: components["schemas"]["CompleteItemIn"][];
            /** @description The body of /lease: once the completion is done, lease this too, in the same request. The answer's `leases` hold what it took. */
            next?: components["schemas"]["LeaseIn"] | null;
        };
        /** CompleteBatchOut */
        CompleteBatchOut: {
            /**
             * Leases
             * @description Only when the request had `next`: the leases it took (maybe none).
             */
            leases?: components["schemas"]["LeaseOut"][];
            /** Results */
            results: components["schemas"]["ItemOut"][];
        };
        /** CompleteIn */
        CompleteIn: {
            /** Lead Id */
            lead_id: number;
            /** Token */
            token: string;
            /**
             * Status
             * @description Default: "done".
             * @enum {string}
             */
            status?: "done" | "failed" | "cached";
            /**
             * Result
             * @description Any JSON value, kept with the lead.
             */
            result?: unknown;
            /** Error */
            error?: string | null;
            /** @description The body of /lease: once the completion is done, lease this too, in the same request. The answer's `leases` hold what it took. */
            next?: components["schemas"]["LeaseIn"] | null;
        };
        /** CompleteItemIn */
        CompleteItemIn: {
            /** Lead Id */
            lead_id: number;
            /** Token */
            token: string;
            /**
             * Status
             * @description Default: "done".
             * @enum {string}
             */
            status?: "done" | "failed" | "cached";
            /**
             * Result
             * @description Any JSON value, kept with the lead.
             */
            result?: unknown;
            /** Error */
            error?: string | null;
        };
        /** CompleteOut */
        CompleteOut: {
            /**
             * Leases
             * @description Only when the request had `next`: the leases it took (maybe none).
             */
            leases?: components["schemas"]["LeaseOut"][];
            lead: components["schemas"]["LeadOut"];
        };
        /** CountsOut */
        CountsOut: {
            /** Queued */
            queued: number;
            /** Leased */
            leased: number;
            /** Done */
            done: number;
            /** Failed */
            failed: number;
            /** Cached */
            cached: number;
            /**
             * Blocked
             * @description Queued leads waiting on others (in queued too).
             */
            blocked: number;
            /**
             * Pending
             * @description queued + leased
             */
            pending: number;
            /**
             * Oldest Available Age S
             * @description Seconds, on the database clock, since the oldest lead that could be leased now became available; null when none. The scaling signal.
             */
            oldest_available_age_s: number | null;
            /**
             * Paused Until
             * @description No lease of the session begins before this instant (database clock); null: not paused. Set by a pause or a throttled release, never by a change of settings.
             */
            paused_until: string | null;
        };
        /** CreatedOut */
        CreatedOut: {
            /** Name */
            name: string;
            /** Role */
            role: string;
            /** Sessions */
            sessions: string;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Expires At */
            expires_at: string | null;
            /** Last Used At */
            last_used_at: string | null;
            /** Revoked At */
            revoked_at: string | null;
            /**
             * Token
             * @description The bearer token. Shown this once: only a hash is kept.
             */
            token: string;
        };
        /** EventOut */
        EventOut: {
            /**
             * Id
             * @description The ledger's order: events are listed by it.
             */
            id: number;
            /**
             * Event
             * @description pushed, leased, released, expired, completed, cancelled, retried or failed (failed because a lead it waits on failed).
             */
            event: string;
            /**
             * Status
             * @description The lead's status the event left.
             * @enum {string}
             */
            status: "queued" | "leased" | "done" | "failed" | "cached";
            /** Attempt */
            attempt: number;
            /** Owner */
            owner: string | null;
            /**
             * At
             * Format: date-time
             * @description When, on the database clock.
             */
            at: string;
            /**
             * Expires At
             * @description Of a lease: the expiry granted; of an expiry: the one the sweeper found (its last renewal's).
             */
            expires_at: string | null;
        };
        /** Health */
        Health: {
            /**
             * Status
             * @enum {string}
             */
            status: "ok" | "ready";
        };
        /**
         * ItemOut
         * @description ``{"lead_id", "ok": true[, "expires_at", "ttl_s"]}`` or ``{"lead_id", "ok": false, "code"}``.
         */
        ItemOut: {
            /** Lead Id */
            lead_id: number;
            /** Ok */
            ok: boolean;
            /**
             * Expires At
             * Format: date-time
             * @description A renewal's, when ok: the lease's new expiry.
             */
            expires_at?: string;
            /**
             * Ttl S
             * @description A renewal's, when ok: The seconds granted: time heartbeats from your own send time with it, never by comparing expires_at (the database's clock) with your clock.
             */
            ttl_s?: number;
            /**
             * Code
             * @description When not ok: why (the lease is no longer valid).
             * @enum {string}
             */
            code?: "lease_lost";
            /**
             * Fence
             * @description A renewal's, when ok: the lease's fence with its new expiry.
             */
            fence?: string;
        };
        /** LeadAnswer */
        LeadAnswer: {
            lead: components["schemas"]["LeadOut"];
        };
        /** LeadEventsOut */
        LeadEventsOut: {
            lead: components["schemas"]["LeadOut"];
            /**
             * Events
             * @description The newest 1,000 events, oldest first.
             */
            events: components["schemas"]["EventOut"][];
            /**
             * Earlier Events
             * @description Events older than those listed.
             */
            earlier_events: number;
            /**
             * Dependents
             * @description The ids of the leads that wait on this one.
             */
            dependents: number[];
        };
        /**
         * LeadFilterIn
         * @description Which leads of the session: the list's query fields.
         */
        LeadFilterIn: {
            /**
             * Status
             * @description Any of these.
             */
            status?: ("queued" | "leased" | "done" | "failed" | "cached")[] | null;
            /**
             * Key Prefix
             * @description Leads whose dedupe `key` starts with this.
             */
            key_prefix?: string | null;
            /**
             * Owner
             * @description Leads held, or last held, by this worker.
             */
            owner?: string | null;
            /**
             * Error
             * @description Leads whose error contains this text, in any case.
             */
            error?: string | null;
            /** Created After */
            created_after?: string | null;
            /** Created Before */
            created_before?: string | null;
            /** Updated After */
            updated_after?: string | null;
            /** Updated Before */
            updated_before?: string | null;
        };
        /** LeadOut */
        LeadOut: {
            /** Id */
            id: number;
            /** Session */
            session: string;
            /** Priority */
            priority: number;
            /** Payload */
            payload: {
                [key: string]: unknown;
            };
            /** Key */
            key: string | null;
            /**
             * Status
             * @enum {string}
             */
            status: "queued" | "leased" | "done" | "failed" | "cached";
            /** Owner */
            owner: string | null;
            /** Attempts */
            attempts: number;
            /** Max Attempts */
            max_attempts: number;
            /**
             * Available At
             * Format: date-time
             */
            available_at: string;
            /** Lease Expires At */
            lease_expires_at: string | null;
            /** Result */
            result: unknown;
            /** Error */
            error: string | null;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /**
             * Updated At
             * Format: date-time
             */
            updated_at: string;
            /** Depth */
            depth: number;
            /** Parent Id */
            parent_id: number | null;
            /**
             * Checkpoint
             * @description What the last holder's renewals carried; null: none.
             */
            checkpoint: unknown;
            /** Concurrency Key */
            concurrency_key: string | null;
            /**
             * Max Runtime S
             * @description Its own; null: the session's default.
             */
            max_runtime_s: number | null;
            /**
             * Traceparent
             * @description W3C Trace Context it was pushed with; null: none.
             */
            traceparent: string | null;
            /**
             * After
             * @description The ids of the leads it waits on; []: none.
             */
            after: number[];
        };
        /** LeadPageOut */
        LeadPageOut: {
            /**
             * Leads
             * @description Each as `GET /leads/{id}` answers it.
             */
            leads: components["schemas"]["LeadOut"][];
            /**
             * Next Cursor
             * @description Give it as `cursor` for the next page; null on the last.
             */
            next_cursor: string | null;
        };
        /**
         * LeaseIn
         * @description ``session`` leases that session; ``sessions`` (or neither: any session) leases the one
         *     of them furthest below its fair share by weight.
         */
        LeaseIn: {
            /**
             * Session
             * @description The session to lease from.
             */
            session?: string | null;
            /**
             * Sessions
             * @description Lease from whichever of these sessions is furthest below its fair share (instead of `session`); with neither, from any session.
             */
            sessions?: string[] | null;
            /**
             * Owner
             * @example w1
             */
            owner: string;
            /**
             * Max
             * @description Default: 1.
             */
            max?: number;
            /** Ttl S */
            ttl_s?: number | null;
            /**
             * Wait S
             * @description Hold the request up to this long until work arrives. Default: 0.
             */
            wait_s?: number;
        };
        /** LeaseOut */
        LeaseOut: {
            lead: components["schemas"]["LeadOut"];
            /**
             * Token
             * @description Opaque; renew, complete and release need it.
             */
            token: string;
            /**
             * Attempt
             * @description Fencing number: only grows for a lead.
             */
            attempt: number;
            /** Owner */
            owner: string;
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /**
             * Ttl S
             * @description The seconds granted: time heartbeats from your own send time with it, never by comparing expires_at (the database's clock) with your clock.
             */
            ttl_s: number;
            /**
             * Fence
             * @description The lease named and signed by the service (`1.<lead>.<attempt>.<expires_at_ms>.<sig>`, HMAC-SHA256 by a key of LEASEQ_FENCE_KEYS): pass it to the systems you write to, which check it offline (`verify_fence`) or with `SELECT leaseq_fence_current(fence)` (docs/beyond.md#fences).
             */
            fence: string;
        };
        /** LeasesOut */
        LeasesOut: {
            /** Leases */
            leases: components["schemas"]["LeaseOut"][];
        };
        /** NewLeadIn */
        NewLeadIn: {
            /**
             * Payload
             * @description Any JSON object.
             */
            payload: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description Higher first. Default: 0.
             */
            priority?: number;
            /**
             * Key
             * @description Dedupe key: a key already in the session is not pushed again.
             */
            key?: string | null;
            /**
             * Depth
             * @description Default: 0.
             */
            depth?: number;
            /** Parent Id */
            parent_id?: number | null;
            /** Max Attempts */
            max_attempts?: number | null;
            /**
             * Delay S
             * @description Not leasable before this many seconds. Default: 0.
             */
            delay_s?: number;
            /**
             * Concurrency Key
             * @description At most the session's max_leased_per_key leads of one key leased at once.
             */
            concurrency_key?: string | null;
            /**
             * Max Runtime S
             * @description No renewal past this many seconds after a lease; null: the session's.
             */
            max_runtime_s?: number | null;
            /**
             * Traceparent
             * @description W3C Trace Context (version not ff, ids not all zeros): handed to the workers of the lead; wins over the request's traceparent header.
             */
            traceparent?: string | null;
            /**
             * After
             * @description Not available until each of these leads of the session is done or cached: an id, or {"key": k} for the lead with that key (pushed before, or earlier in this call); failed when one of them fails.
             */
            after?: (number | components["schemas"]["AfterKeyIn"])[];
        };
        /** OwnerReportOut */
        OwnerReportOut: {
            /**
             * Owner
             * @description The worker name the leases were taken under.
             */
            owner: string;
            /** Leases */
            leases: number;
            /** Completions */
            completions: number;
            /**
             * Wasted
             * @description Its leases that ended without a completion.
             */
            wasted: number;
        };
        /** PauseIn */
        PauseIn: {
            /**
             * For S
             * @description Seconds (database clock) until the pause ends by itself; null: until resumed.
             */
            for_s?: number | null;
        };
        /** PushIn */
        PushIn: {
            /** Leads */
            leads: components["schemas"]["NewLeadIn"][];
        };
        /** PushOut */
        PushOut: {
            /**
             * Ids
             * @description In input order; a duplicate's existing id in its place.
             */
            ids: number[];
            /** Created */
            created: number;
            /** Duplicates */
            duplicates: number;
        };
        /** ReleaseIn */
        ReleaseIn: {
            /** Lead Id */
            lead_id: number;
            /** Token */
            token: string;
            /**
             * Delay S
             * @description Default: 0.
             */
            delay_s?: number;
            /**
             * Error
             * @description Why the lead is given back; kept when this was its last attempt.
             */
            error?: string | null;
            /**
             * Throttle S
             * @description A cooldown: the whole session pauses until now + throttle_s (database clock), and this lease does not count against max_attempts.
             */
            throttle_s?: number | null;
            /**
             * Unstarted
             * @description The holder never started the lead (it was prefetched): this lease does not count against max_attempts, so giving it back cannot fail the lead. Default: false.
             */
            unstarted?: boolean;
        };
        /** RenewBatchIn */
        RenewBatchIn: {
            /** Items */
            items: components["schemas"]["RenewIn"][];
        };
        /** RenewIn */
        RenewIn: {
            /** Lead Id */
            lead_id: number;
            /** Token */
            token: string;
            /** Ttl S */
            ttl_s?: number | null;
            /**
             * Checkpoint
             * @description Any JSON (not null), stored on the lead and handed to its next holder in its lease: where this holder got to. At most LEASEQ_MAX_PAYLOAD_BYTES as compact JSON.
             */
            checkpoint?: unknown;
        };
        /** RenewOut */
        RenewOut: {
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /**
             * Ttl S
             * @description The seconds granted: time heartbeats from your own send time with it, never by comparing expires_at (the database's clock) with your clock.
             */
            ttl_s: number;
            /**
             * Fence
             * @description The lease's fence with its new expiry. The lease named and signed by the service (`1.<lead>.<attempt>.<expires_at_ms>.<sig>`, HMAC-SHA256 by a key of LEASEQ_FENCE_KEYS): pass it to the systems you write to, which check it offline (`verify_fence`) or with `SELECT leaseq_fence_current(fence)` (docs/beyond.md#fences).
             */
            fence: string;
        };
        /**
         * ReportOut
         * @description The ledger's audit of a session; see ``app.domain.report``.
         */
        ReportOut: {
            /** Leads */
            leads: number;
            /** Pushed */
            pushed: number;
            /** Leases */
            leases: number;
            /**
             * Completed
             * @description Leads with a completion.
             */
            completed: number;
            /**
             * Completions
             * @description Completion events.
             */
            completions: number;
            /**
             * Double Completions
             * @description Leads completed more than once; must be 0.
             */
            double_completions: number;
            /**
             * Overlapping Leases
             * @description Leases given while one was valid; must be 0.
             */
            overlapping_leases: number;
            /**
             * Wasted Attempts
             * @description Leases that ended without a completion.
             */
            wasted_attempts: number;
            /** Expired */
            expired: number;
            /** Released */
            released: number;
            /** Cancelled */
            cancelled: number;
            /** Retried */
            retried: number;
            /**
             * Failed
             * @description Leads failed because a lead they wait on failed.
             */
            failed: number;
            /**
             * Attempts Per Lead
             * @description Leads by the number of leases they took: {leases: leads}.
             */
            attempts_per_lead: {
                [key: string]: number;
            };
            /**
             * Owners
             * @description Per worker, ordered by name.
             */
            owners: components["schemas"]["OwnerReportOut"][];
        };
        /** RetriedOut */
        RetriedOut: {
            /**
             * Requeued
             * @description Failed leads queued again.
             */
            requeued: number;
        };
        /**
         * ScalingOut
         * @description The signal to scale workers on (docs/beyond.md#a-signal-to-scale-on), in the shape
         *     KEDA's metrics-api scaler reads (`valueLocation: suggested_workers`).
         */
        ScalingOut: {
            /**
             * Session
             * @description The session; `*` for a fleet's total.
             */
            session: string;
            /**
             * Backlog
             * @description Its queued leads (delayed and blocked ones too).
             */
            backlog: number;
            /**
             * Leased
             * @description Its leads leased now.
             */
            leased: number;
            /**
             * Oldest Available Age S
             * @description Seconds, on the database clock, since its oldest lead that could be leased now became available; null when none.
             */
            oldest_available_age_s: number | null;
            /**
             * Completions Per S
             * @description Leads finished per second, over the last minute.
             */
            completions_per_s: number;
            /**
             * Suggested Workers
             * @description Workers enough to finish the backlog and the leads in flight within target_wait_s at the last minute's rate per worker; 0 when nothing is queued or leased.
             */
            suggested_workers: number;
        };
        /** ScheduleIn */
        ScheduleIn: {
            /**
             * Session
             * @description The session each tick's lead is pushed to.
             * @example s
             */
            session: string;
            /**
             * Cron
             * @description Five fields (minute hour day-of-month month day-of-week), or @daily etc.
             * @example *\/5 * * * *
             */
            cron: string;
            /**
             * Timezone
             * @description The IANA time zone the cron expression is read in. Default: "UTC".
             * @example Europe/Paris
             */
            timezone?: string;
            lead: components["schemas"]["ScheduleLeadIn"];
        };
        /**
         * ScheduleLeadIn
         * @description The lead pushed at each tick: a lead of a push, without its key (the tick's).
         */
        ScheduleLeadIn: {
            /**
             * Payload
             * @description Any JSON object.
             */
            payload: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description Higher first. Default: 0.
             */
            priority?: number;
            /** Max Attempts */
            max_attempts?: number | null;
            /**
             * Delay S
             * @description Not leasable before this many seconds after its tick. Default: 0.
             */
            delay_s?: number;
        };
        /** ScheduleOut */
        ScheduleOut: {
            /** Name */
            name: string;
            /** Session */
            session: string;
            /** Cron */
            cron: string;
            /** Timezone */
            timezone: string;
            /** Lead */
            lead: {
                [key: string]: unknown;
            };
            /**
             * Next Tick
             * Format: date-time
             * @description The next tick, on the database clock.
             */
            next_tick: string;
        };
        /** SchedulesOut */
        SchedulesOut: {
            /** Schedules */
            schedules: components["schemas"]["ScheduleOut"][];
        };
        /** SelfOut */
        SelfOut: {
            /** Name */
            name: string;
            /**
             * Role
             * @description The token's role; `full` for a full-access token.
             */
            role: string;
            /** Sessions */
            sessions: string;
            /**
             * Operate
             * @description Whether it may cancel, retry, change settings, sweep.
             */
            operate: boolean;
            /** Manage Tokens */
            manage_tokens: boolean;
        };
        /**
         * SettingsIn
         * @description A session's settings; a field left out takes its default (PUT replaces them all).
         */
        SettingsIn: {
            /**
             * Weight
             * @description Its share of the leases of a lease across sessions, against the other sessions with work. Default: 1.0.
             */
            weight?: number;
            /**
             * Max Leased
             * @description At most this many of its leads leased at once, across every worker; null: no cap.
             */
            max_leased?: number | null;
            /**
             * Rate Per S
             * @description Leases granted per second at most (a token bucket on the database clock); null: no rate.
             */
            rate_per_s?: number | null;
            /**
             * Burst
             * @description The bucket's size: leases granted at once after a quiet time; null: one second's worth (at least 1). Needs rate_per_s.
             */
            burst?: number | null;
            /**
             * Max Leased Per Key
             * @description At most this many leads of one concurrency_key leased at once, across every worker; null: no cap per key.
             */
            max_leased_per_key?: number | null;
            /**
             * Max Runtime S
             * @description The default maximum runtime of its leads; null: none.
             */
            max_runtime_s?: number | null;
            /**
             * Max Queued
             * @description At most this many of its leads queued (not leased, not finished): a push that would pass it answers 429 quota_exceeded and stores none of its leads; null: the service's LEASEQ_MAX_QUEUED (none when unset).
             */
            max_queued?: number | null;
        };
        /** SettingsOut */
        SettingsOut: {
            /** Weight */
            weight: number;
            /** Max Leased */
            max_leased: number | null;
            /** Rate Per S */
            rate_per_s: number | null;
            /** Burst */
            burst: number | null;
            /** Max Leased Per Key */
            max_leased_per_key: number | null;
            /** Max Runtime S */
            max_runtime_s: number | null;
            /** Max Queued */
            max_queued: number | null;
            /**
             * Paused Until
             * @description No lease of the session begins before this instant (database clock); null: not paused. Set by a pause or a throttled release, never by a change of settings.
             */
            paused_until: string | null;
        };
        /**
         * SweepIn
         * @description ``{"session": "s"}`` sweeps one session, ``{"all": true}`` every session.
         */
        SweepIn: {
            /** Session */
            session?: string | null;
            /**
             * All
             * @description Default: false.
             */
            all?: boolean;
        };
        /** SweepOut */
        SweepOut: {
            /** Requeued */
            requeued: number;
            /** Failed */
            failed: number;
        };
        /** ThroughputOut */
        ThroughputOut: {
            /**
             * Now
             * Format: date-time
             * @description The database clock: the end of the last minute.
             */
            now: string;
            /**
             * Completed
             * @description Leads finished (done or cached) in each of the last 60 minutes, oldest first.
             */
            completed: number[];
            /**
             * Failed
             * @description Leads failed in each of those minutes, oldest first.
             */
            failed: number[];
        };
        /**
         * TokenIn
         * @description A new token: its role, its sessions (a pattern), optionally a name and a lifetime.
         */
        TokenIn: {
            /**
             * Name
             * @description Unique among live tokens; made up when absent.
             */
            name?: string | null;
            /**
             * Role
             * @description producer, worker, operator or reader.
             * @enum {string}
             */
            role: "producer" | "worker" | "operator" | "reader";
            /**
             * Sessions
             * @description A session name, optionally ending in `*`; or `*`.
             */
            sessions: string;
            /**
             * Expires S
             * @description Seconds it lives; null: no expiry.
             */
            expires_s?: number | null;
        };
        /** TokenOut */
        TokenOut: {
            /** Name */
            name: string;
            /** Role */
            role: string;
            /** Sessions */
            sessions: string;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Expires At */
            expires_at: string | null;
            /** Last Used At */
            last_used_at: string | null;
            /** Revoked At */
            revoked_at: string | null;
        };
        /** TokensOut */
        TokensOut: {
            /** Tokens */
            tokens: components["schemas"]["TokenOut"][];
        };
        /** @description An error answer (RFC 9457, application/problem+json) with leaseq's stable `code`. Branch on `code`, never on `title` or `detail`. */
        Problem: {
            /** @description `urn:leaseq:problem:` and the code. */
            type: string;
            /** @description The code's title, for people. */
            title: string;
            /** @description The answer's HTTP status. */
            status: number;
            /** @description What went wrong, for people. */
            detail?: string;
            /**
             * @description `lease_lost` (409): the lease is not valid (expired, swept, re-leased, completed, cancelled or another token): stop working on the lead, do not retry; `not_found` (404): no such lead, schedule or token; `validation_error` (422): the input breaks a rule (`errors` name where); nothing changed; `conflict` (409): the lead's status does not allow this; nothing changed; `incomplete_body` (400): the body ended before its Content-Length; nothing was done; `unauthorized` (401): no valid bearer token (tokens are configured); `forbidden` (403): outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed; `payload_too_large` (413): the body is over LEASEQ_MAX_BODY_BYTES; `unsupported_media_type` (415): a body that is not sent as application/json; nothing changed; `quota_exceeded` (429): the push would pass the session's max_queued; none of it was stored: retry after Retry-After; `unavailable` (503): the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After; `method_not_allowed` (405): the path does not serve this method; `internal_error` (500): a fault of the service (a bug), answered without detail.
             * @enum {string}
             */
            code: "lease_lost" | "not_found" | "validation_error" | "conflict" | "incomplete_body" | "unauthorized" | "forbidden" | "payload_too_large" | "unsupported_media_type" | "quota_exceeded" | "unavailable" | "method_not_allowed" | "internal_error";
            /** @description With validation_error: each fault, where (`loc`) and what. */
            errors?: {
                /** @description The path to the fault: ["body", "leads", 0, "key"]. */
                loc: (string | number)[];
                msg: string;
                /** @description The kind of fault. */
                type?: string;
            }[];
            /**
             * @description With lease_lost, when known: its maximum runtime ended.
             * @enum {string}
             */
            reason?: "max_runtime";
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: {
        /** @description Seconds to wait before sending the request again. */
        "Retry-After": number;
        /** @description The challenge: `Bearer realm="leaseq"`, with `error="invalid_token"` when a token was sent. */
        "WWW-Authenticate": string;
        /** @description The methods the path serves. */
        Allow: string;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listLeads: {
        parameters: {
            query?: {
                /** @description By id: newest (the default) or oldest. */
                order?: "newest" | "oldest";
                /** @description Leads a page. */
                limit?: number;
                /** @description The previous page's `next_cursor`. */
                cursor?: string;
                /** @description Any of these (repeat it). */
                status?: ("queued" | "leased" | "done" | "failed" | "cached")[];
                /** @description Leads whose dedupe `key` starts with this. */
                key_prefix?: string;
                /** @description Leads held, or last held, by this worker. */
                owner?: string;
                /** @description Leads whose error contains this text, in any case. */
                error?: string;
                /** @description RFC 3339 with its offset; `after` is inclusive, `before` exclusive. */
                created_after?: string;
                /** @description RFC 3339 with its offset; `after` is inclusive, `before` exclusive. */
                created_before?: string;
                /** @description RFC 3339 with its offset; `after` is inclusive, `before` exclusive. */
                updated_after?: string;
                /** @description RFC 3339 with its offset; `after` is inclusive, `before` exclusive. */
                updated_before?: string;
            };
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeadPageOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    push: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id of this one intent (a UUID): sent again with the same request, the first answer comes back instead of a second effect. Kept for LEASEQ_IDEMPOTENCY_TTL_S at least. */
                "Idempotency-Key"?: string;
                /** @description W3C Trace Context of the producer's span, stored on each lead without its own `traceparent`; ignored when malformed. Not part of what an Idempotency-Key names: a retry in another span is the same push. */
                traceparent?: string;
            };
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PushIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PushOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `conflict`: the lead's status does not allow this; nothing changed. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `quota_exceeded`: the push would pass the session's max_queued; none of it was stored: retry after Retry-After. */
            429: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getPush: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
                /** @description The `Idempotency-Key` the push was sent with (percent-encoded). */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PushOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    lease: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id of this one intent (a UUID): sent again with the same request, the first answer comes back instead of a second effect. Kept for LEASEQ_IDEMPOTENCY_TTL_S at least. */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LeaseIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeasesOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renew: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RenewIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RenewOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is not valid (expired, swept, re-leased, completed, cancelled or another token): stop working on the lead, do not retry. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renewBatch: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RenewBatchIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    complete: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id of this one intent (a UUID): sent again with the same request, the first answer comes back instead of a second effect. Kept for LEASEQ_IDEMPOTENCY_TTL_S at least. */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CompleteIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompleteOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is not valid (expired, swept, re-leased, completed, cancelled or another token): stop working on the lead, do not retry. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    completeBatch: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id of this one intent (a UUID): sent again with the same request, the first answer comes back instead of a second effect. Kept for LEASEQ_IDEMPOTENCY_TTL_S at least. */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CompleteBatchIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompleteBatchOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    release: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeadAnswer"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is not valid (expired, swept, re-leased, completed, cancelled or another token): stop working on the lead, do not retry. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    sweep: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SweepIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SweepOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getSessionStats: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CountsOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getStats: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AllStatsOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getScaling: {
        parameters: {
            query?: {
                /** @description The longest a lead should wait for a worker, in seconds (default 60). */
                target_wait_s?: number;
            };
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ScalingOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getScalingAll: {
        parameters: {
            query?: {
                /** @description The longest a lead should wait for a worker, in seconds (default 60). */
                target_wait_s?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AllScalingOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getSettings: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    putSettings: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SettingsIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    pause: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PauseIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    resume: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getReport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReportOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getLead: {
        parameters: {
            query?: {
                /** @description Seconds to hold the request until the lead is terminal (0: answer at once). */
                wait_s?: number;
            };
            header?: never;
            path: {
                lead_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeadOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    cancelLead: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lead_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeadOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `conflict`: the lead's status does not allow this; nothing changed. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    retryLead: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lead_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeadOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `conflict`: the lead's status does not allow this; nothing changed. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getLeadEvents: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lead_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LeadEventsOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    retryFailed: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RetriedOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The schedule's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ScheduleOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    putSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The schedule's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ScheduleIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ScheduleOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The schedule's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listSchedules: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SchedulesOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Prometheus text format, version 0.0.4. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getDashboard: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The page (HTML): a shell with no data, that may not be framed. */
            200: {
                headers: {
                    "X-Frame-Options"?: "DENY";
                    "Content-Security-Policy"?: "frame-ancestors 'none'";
                    "Cache-Control"?: "no-cache";
                    [name: string]: unknown;
                };
                content: {
                    "text/html": string;
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getDashboardData: {
        parameters: {
            query?: {
                /** @description Part of a session's name. */
                search?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    retryLeads: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ByIds"] | components["schemas"]["ByFilter"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    cancelLeads: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ByIds"] | components["schemas"]["ByFilter"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getThroughput: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The session's name. */
                session: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ThroughputOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listTokens: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokensOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createToken: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TokenIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedOut"];
                };
            };
            /** @description `incomplete_body`: the body ended before its Content-Length; nothing was done. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unsupported_media_type`: a body that is not sent as application/json; nothing changed. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    revokeToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Its name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lead, schedule or token. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the input breaks a rule (`errors` name where); nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getOwnToken: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SelfOut"];
                };
            };
            /** @description `unauthorized`: no valid bearer token (tokens are configured). */
            401: {
                headers: {
                    "WWW-Authenticate": components["headers"]["WWW-Authenticate"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: outside the token's role or sessions, a Host not served without tokens, or a browser's cross-site request; nothing changed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getHealth: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getReadiness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
            /** @description `method_not_allowed`: the path does not serve this method. */
            405: {
                headers: {
                    Allow: components["headers"]["Allow"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again. */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over LEASEQ_MAX_BODY_BYTES. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the request head (request line and headers) is over 64 KiB. */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `internal_error`: a fault of the service (a bug), answered without detail. */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database does not answer, or a bound of the process was reached; nothing was done: retry after Retry-After. */
            503: {
                headers: {
                    "Retry-After": components["headers"]["Retry-After"];
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
}
