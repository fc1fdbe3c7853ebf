package leaseq

import (
	"encoding/json"
	"time"
)

// LeadStatus is a lead's place in its life: queued, then leased, then one of
// the terminal Done, Failed or Cached.
type LeadStatus string

// The statuses of a lead. Done, Failed and Cached are the ones a completion
// may give (Cached: finished without doing the work, the result came from
// elsewhere).
const (
	Queued LeadStatus = "queued"
	Leased LeadStatus = "leased"
	Done   LeadStatus = "done"
	Failed LeadStatus = "failed"
	Cached LeadStatus = "cached"
)

// Terminal reports whether the status is final (done, failed or cached).
func (s LeadStatus) Terminal() bool { return s == Done || s == Failed || s == Cached }

// Lead is one unit of work of a session.
//
// To push one, give SessionID and Payload (a JSON object; nil is {}), and
// any of Priority, Key, Depth, ParentID, MaxAttempts, Delay, ConcurrencyKey,
// MaxRuntimeS, Traceparent, After and AfterKeys. The service answers the
// rest; a zero value means "none" (no key, no parent, the service's default
// max_attempts, ...).
type Lead struct {
	ID             int64           `json:"id"`
	SessionID      string          `json:"session"`
	Priority       int             `json:"priority"`
	Payload        json.RawMessage `json:"payload"`
	Key            string          `json:"key"` // dedupe key, unique per session; "" for none
	Depth          int             `json:"depth"`
	ParentID       int64           `json:"parent_id"` // 0 for none
	Status         LeadStatus      `json:"status"`
	Owner          string          `json:"owner"` // the worker that holds it, or held it last
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"` // pushed as 0: the service's default (5)
	AvailableAt    time.Time       `json:"available_at"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"` // zero when not leased
	Result         json.RawMessage `json:"result"`           // nil for none
	Error          string          `json:"error"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Checkpoint     json.RawMessage `json:"checkpoint"` // what the last holder's renewals carried; nil: none
	ConcurrencyKey string          `json:"concurrency_key"`
	MaxRuntimeS    int             `json:"max_runtime_s"` // its own; 0: the session's default
	Traceparent    string          `json:"traceparent"`
	After          []int64         `json:"after"` // the ids of the leads it waits on

	// Delay keeps a pushed lead from being leased for so long (push only).
	Delay time.Duration `json:"-"`
	// AfterKeys are leads of the session it waits on, named by their dedupe
	// keys (pushed before, or earlier in the same call), beside After's ids
	// (push only).
	AfterKeys []string `json:"-"`
}

// UnmarshalJSON reads a lead object of the API; a JSON null reads as nil.
func (l *Lead) UnmarshalJSON(data []byte) error {
	type plain Lead
	if err := json.Unmarshal(data, (*plain)(l)); err != nil {
		return err
	}
	l.Payload = orNil(l.Payload)
	l.Result = orNil(l.Result)
	l.Checkpoint = orNil(l.Checkpoint)
	return nil
}

func orNil(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// Lease is a worker's claim on one lead.
//
// Lead and Owner are those of the queue API; the rest is what the service
// answers with the lease: Token (opaque; renew, complete and release send
// it), Attempt (a fencing number that only grows for the lead), ExpiresAt
// (on the database's clock: for display, never compared with this
// machine's clock), TTL (the time granted, from which a worker times its
// heartbeats from its own send time) and Fence (a signed name of this
// lease for the writers downstream; see VerifyFence).
type Lease struct {
	Lead  *Lead
	Owner string

	Token     string
	Attempt   int
	ExpiresAt time.Time
	TTL       time.Duration
	Fence     string
}

type leaseJSON struct {
	Lead      *Lead     `json:"lead"`
	Token     string    `json:"token"`
	Attempt   int       `json:"attempt"`
	Owner     string    `json:"owner"`
	ExpiresAt time.Time `json:"expires_at"`
	TTLS      float64   `json:"ttl_s"`
	Fence     string    `json:"fence"`
}

func (w *leaseJSON) lease() *Lease {
	return &Lease{
		Lead:      w.Lead,
		Owner:     w.Owner,
		Token:     w.Token,
		Attempt:   w.Attempt,
		ExpiresAt: w.ExpiresAt,
		TTL:       duration(w.TTLS),
		Fence:     w.Fence,
	}
}

func leasesOf(wire []leaseJSON) []*Lease {
	leases := make([]*Lease, len(wire))
	for i := range wire {
		leases[i] = wire[i].lease()
	}
	return leases
}

// Stats counts a session's leads by status.
type Stats struct {
	Queued, Leased, Done, Failed, Cached int

	// Blocked counts the queued leads waiting on others (counted in Queued too).
	Blocked int
	// OldestAvailableAge is how long the oldest lead that could be leased now
	// has waited (on the database's clock); nil when there is none.
	OldestAvailableAge *time.Duration
	// PausedUntil: no lease of the session begins before it; zero when not paused.
	PausedUntil time.Time
}

// Pending reports work that is not finished: queued plus in flight.
func (s Stats) Pending() int { return s.Queued + s.Leased }

type statsJSON struct {
	Queued              int       `json:"queued"`
	Leased              int       `json:"leased"`
	Done                int       `json:"done"`
	Failed              int       `json:"failed"`
	Cached              int       `json:"cached"`
	Blocked             int       `json:"blocked"`
	OldestAvailableAgeS *float64  `json:"oldest_available_age_s"`
	PausedUntil         time.Time `json:"paused_until"`
}

func (w statsJSON) stats() Stats {
	s := Stats{
		Queued: w.Queued, Leased: w.Leased, Done: w.Done, Failed: w.Failed, Cached: w.Cached,
		Blocked: w.Blocked, PausedUntil: w.PausedUntil,
	}
	if w.OldestAvailableAgeS != nil {
		age := duration(*w.OldestAvailableAgeS)
		s.OldestAvailableAge = &age
	}
	return s
}

// ItemResult is one item's answer in a batch of renewals or completions, in
// the order given: OK, or the Code of why not (lease_lost). A renewal's
// carries the new ExpiresAt, the TTL granted and the lease's new Fence.
type ItemResult struct {
	LeadID    int64
	OK        bool
	Code      string
	ExpiresAt time.Time
	TTL       time.Duration
	Fence     string
}

type itemJSON struct {
	LeadID    int64     `json:"lead_id"`
	OK        bool      `json:"ok"`
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
	TTLS      float64   `json:"ttl_s"`
	Fence     string    `json:"fence"`
}

func resultsOf(wire []itemJSON) []ItemResult {
	results := make([]ItemResult, len(wire))
	for i, w := range wire {
		results[i] = ItemResult{
			LeadID: w.LeadID, OK: w.OK, Code: w.Code, ExpiresAt: w.ExpiresAt,
			TTL: duration(w.TTLS), Fence: w.Fence,
		}
	}
	return results
}

// duration is a number of seconds of the wire as a time.Duration.
func duration(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second))
}

// seconds is a time.Duration as the wire's number of seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }
