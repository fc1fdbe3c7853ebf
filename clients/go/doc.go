// Package leaseq is the Go client of leaseq, a lease queue service on
// PostgreSQL: standard library only, Go 1.19 and newer.
//
// It serves, over the service's REST API, the API of the Go queue package
// leaseq grew from, so that a program written against that package moves to
// leaseq by changing its import and its constructor:
//
//	q, err := leaseq.New("http://127.0.0.1:8000", leaseq.WithTTL(time.Minute))
//	err = q.Push(ctx, []leaseq.Lead{{SessionID: "crawl", Payload: []byte(`{"url":"…"}`)}})
//	lease, err := q.LeaseNext(ctx, "crawl", "worker-1") // nil, nil: nothing queued
//	ok, err := q.Renew(ctx, lease)                      // false: the lease is gone, stop
//	err = q.Complete(ctx, lease, leaseq.Done)           // ErrLeaseLost: it was taken
//
// Release, Sweep, Stats (with Pending), TTL, DefaultLeaseTTL and
// ErrLeaseLost are there too. The queue package's SetClock is not: a
// lease's time is judged by the database's clock alone, never by the
// client's, so there is no clock of the client's to set.
//
// Beside them are the service's own calls: leases of several leads with a
// long poll (Lease), renewals and completions in batches, a completion that
// leases the next leads in the same request (CompleteAndLease,
// CompleteBatch) under an Idempotency-Key its retries repeat, checkpoints,
// a lead's outcome awaited (WaitLead), cancel and retry, one by one or in
// bulk, a session's leads listed, its settings, pause and resume, its audit
// (Report) and scaling signal, scoped tokens, and VerifyFence, which checks
// a lease's fence offline.
//
// Every error the service answers is an *Error, with its HTTP Status, its
// stable Code, its Detail and its RetryAfter, and errors.Is matches it
// against the sentinel of its code (ErrLeaseLost, ErrNotFound,
// ErrValidation, ErrConflict, ErrUnavailable, ErrQuotaExceeded, ...).
// Calls are retried on a connection error, a timeout, and a 502, 503 or 504
// answer, with jittered backoff honouring Retry-After, each a call that a
// repeat cannot double: a push and a lease carry an Idempotency-Key that
// their retries repeat, a completion is answered again as the first was, a
// release or a cancel repeated finds the work done (creating a token is the
// one call sent only once).
//
// Worker runs a Handler on each lead with the promise of leaseq's workers:
// it never runs a lead it no longer holds (the handler's ctx is cancelled
// before the lease can end), completes the leads that finish together in one
// request that leases the next ones, holds the next lead before it is needed,
// and gives back what it holds when its Run's ctx ends.
package leaseq
