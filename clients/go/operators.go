package leaseq

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// What producers and operators call: a lead by id (and a wait for its
// outcome), cancel and retry, a session's leads listed and acted on in bulk,
// its settings and pause, its audit, its scaling signal, and tokens.

// GetLead is one lead; an *Error that is ErrNotFound when there is none.
func (q *Queue) GetLead(ctx context.Context, id int64) (*Lead, error) {
	return q.leadCall(ctx, "GET", id, "", nil)
}

// WaitLead waits until the lead is terminal (done, failed or cached) or
// timeout passes, then answers it as it is. The service holds each request
// up to 30 s (no polling); a longer timeout takes several.
func (q *Queue) WaitLead(ctx context.Context, id int64, timeout time.Duration) (*Lead, error) {
	deadline := time.Now().Add(timeout)
	for {
		wait := time.Until(deadline)
		if wait > maxWait {
			wait = maxWait
		}
		if wait < 0 {
			wait = 0
		}
		query := url.Values{"wait_s": {strconv.FormatFloat(seconds(wait), 'f', 3, 64)}}
		lead, err := q.leadCall(ctx, "GET", id, "", query)
		if err != nil || lead.Status.Terminal() || time.Until(deadline) <= 0 {
			return lead, err
		}
	}
}

// CancelLead fails a queued or leased lead with the error "cancelled" (its
// holder's next renew or complete gets ErrLeaseLost); a terminal lead is an
// *Error that is ErrConflict.
func (q *Queue) CancelLead(ctx context.Context, id int64) (*Lead, error) {
	return q.leadCall(ctx, "POST", id, "/cancel", nil)
}

// RetryLead queues a failed lead again (dead-letter replay); any other
// status is an *Error that is ErrConflict.
func (q *Queue) RetryLead(ctx context.Context, id int64) (*Lead, error) {
	return q.leadCall(ctx, "POST", id, "/retry", nil)
}

func (q *Queue) leadCall(ctx context.Context, method string, id int64, rest string, query url.Values) (*Lead, error) {
	path, err := leadPath(id, rest)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(0)
	if wait := query.Get("wait_s"); wait != "" {
		secs, _ := strconv.ParseFloat(wait, 64)
		timeout = q.timeout + duration(secs)
	}
	var lead Lead
	if err := q.do(ctx, call{method: method, path: path, query: query, timeout: timeout}, &lead); err != nil {
		return nil, err
	}
	return &lead, nil
}

// LeadFilter selects a session's leads: by status (any of them), dedupe key
// prefix, owner, a case-insensitive substring of the error, and creation or
// update time. Zero fields select everything.
type LeadFilter struct {
	Statuses      []LeadStatus
	KeyPrefix     string
	Owner         string
	Error         string
	CreatedAfter  time.Time
	CreatedBefore time.Time
	UpdatedAfter  time.Time
	UpdatedBefore time.Time
}

func (f LeadFilter) fields() map[string]any {
	out := map[string]any{}
	if len(f.Statuses) > 0 {
		out["status"] = f.Statuses
	}
	for name, value := range map[string]string{"key_prefix": f.KeyPrefix, "owner": f.Owner, "error": f.Error} {
		if value != "" {
			out[name] = value
		}
	}
	for name, at := range map[string]time.Time{
		"created_after": f.CreatedAfter, "created_before": f.CreatedBefore,
		"updated_after": f.UpdatedAfter, "updated_before": f.UpdatedBefore,
	} {
		if !at.IsZero() {
			out[name] = at.UTC().Format(time.RFC3339Nano)
		}
	}
	return out
}

// LeadQuery is a page of a session's leads: those LeadFilter selects, Order
// "newest" (the default) or "oldest" by id, Limit of them (1 to 500; 0: the
// service's 50), from Cursor (the previous page's NextCursor; "": the first).
type LeadQuery struct {
	LeadFilter
	Order  string
	Limit  int
	Cursor string
}

// LeadPage is one page of a listing; NextCursor is "" on the last.
type LeadPage struct {
	Leads      []Lead
	NextCursor string
}

// ListLeads lists a session's leads a page at a time.
func (q *Queue) ListLeads(ctx context.Context, session string, query LeadQuery) (LeadPage, error) {
	path, err := sessionPath(session, "/leads")
	if err != nil {
		return LeadPage{}, err
	}
	values := url.Values{}
	for name, value := range query.fields() {
		switch v := value.(type) {
		case []LeadStatus:
			for _, status := range v {
				values.Add(name, string(status))
			}
		case string:
			values.Set(name, v)
		}
	}
	if query.Order != "" {
		values.Set("order", query.Order)
	}
	if query.Limit != 0 {
		values.Set("limit", strconv.Itoa(query.Limit))
	}
	if query.Cursor != "" {
		values.Set("cursor", query.Cursor)
	}
	var answer struct {
		Leads      []Lead  `json:"leads"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := q.do(ctx, call{method: "GET", path: path, query: values}, &answer); err != nil {
		return LeadPage{}, err
	}
	page := LeadPage{Leads: answer.Leads}
	if answer.NextCursor != nil {
		page.NextCursor = *answer.NextCursor
	}
	return page, nil
}

// Selection names the leads a bulk retry or cancel acts on: IDs (at most
// 1,000), or the leads a filter selects.
type Selection struct {
	IDs    []int64
	Filter *LeadFilter
}

// BulkResult is what a bulk call changed; More says that leads the filter
// selects are left (each call changes at most 10,000): call again until it
// is false.
type BulkResult struct {
	Changed int
	More    bool
}

// RetryLeads queues the selected failed leads of a session again; a lead in
// another status is left as it is and not counted.
func (q *Queue) RetryLeads(ctx context.Context, session string, which Selection) (BulkResult, error) {
	return q.bulk(ctx, session, "/leads/retry", which)
}

// CancelLeads cancels the selected queued and leased leads of a session; a
// terminal lead is left as it is and not counted.
func (q *Queue) CancelLeads(ctx context.Context, session string, which Selection) (BulkResult, error) {
	return q.bulk(ctx, session, "/leads/cancel", which)
}

func (q *Queue) bulk(ctx context.Context, session, rest string, which Selection) (BulkResult, error) {
	path, err := sessionPath(session, rest)
	if err != nil {
		return BulkResult{}, err
	}
	if (which.IDs == nil) == (which.Filter == nil) {
		return BulkResult{}, invalid("select leads by IDs or by Filter, one of the two")
	}
	body := map[string]any{"ids": which.IDs}
	if which.Filter != nil {
		body = map[string]any{"filter": which.Filter.fields()}
	}
	var answer struct {
		Changed int  `json:"changed"`
		More    bool `json:"more"`
	}
	err = q.do(ctx, call{method: "POST", path: path, body: body}, &answer)
	return BulkResult{answer.Changed, answer.More}, err
}

// Settings are how a session takes part in a lease across sessions, and its
// limits; a nil limit is none. PausedUntil is not a setting but shown with
// them (zero: not paused); PutSettings leaves a pause as it is.
type Settings struct {
	Weight          float64  `json:"weight"`
	MaxLeased       *int     `json:"max_leased,omitempty"`
	RatePerS        *float64 `json:"rate_per_s,omitempty"`
	Burst           *int     `json:"burst,omitempty"`
	MaxLeasedPerKey *int     `json:"max_leased_per_key,omitempty"`
	MaxRuntimeS     *int     `json:"max_runtime_s,omitempty"`
	// MaxQueued bounds the session's leads that are neither leased nor
	// finished: a push past it is an *Error that is ErrQuotaExceeded.
	MaxQueued   *int      `json:"max_queued,omitempty"`
	PausedUntil time.Time `json:"-"`
}

type settingsJSON struct {
	Settings
	PausedUntil time.Time `json:"paused_until"`
}

// GetSettings is the session's settings (the defaults for a session never set).
func (q *Queue) GetSettings(ctx context.Context, session string) (Settings, error) {
	return q.settingsCall(ctx, "GET", session, "/settings", nil)
}

// PutSettings replaces the session's settings (a zero Weight is the default
// 1); they bind every lease that begins after the answer.
func (q *Queue) PutSettings(ctx context.Context, session string, s Settings) (Settings, error) {
	if s.Weight == 0 {
		s.Weight = 1
	}
	return q.settingsCall(ctx, "PUT", session, "/settings", s)
}

// Pause stops the session's leases from beginning for d (0: until resumed);
// leases held go on.
func (q *Queue) Pause(ctx context.Context, session string, d time.Duration) (Settings, error) {
	body := map[string]any{}
	if d != 0 {
		body["for_s"] = seconds(d)
	}
	return q.settingsCall(ctx, "POST", session, "/pause", body)
}

// Resume ends the session's pause (an operator's or a throttled release's).
func (q *Queue) Resume(ctx context.Context, session string) (Settings, error) {
	return q.settingsCall(ctx, "POST", session, "/resume", map[string]any{})
}

func (q *Queue) settingsCall(ctx context.Context, method, session, rest string, body any) (Settings, error) {
	path, err := sessionPath(session, rest)
	if err != nil {
		return Settings{}, err
	}
	var answer settingsJSON
	if err := q.do(ctx, call{method: method, path: path, body: body}, &answer); err != nil {
		return Settings{}, err
	}
	answer.Settings.PausedUntil = answer.PausedUntil
	return answer.Settings, nil
}

// Report is a session's audit, read from the service's ledger: every lead
// completed once shows DoubleCompletions and OverlappingLeases at zero.
type Report struct {
	Leads             int            `json:"leads"`
	Pushed            int            `json:"pushed"`
	Leases            int            `json:"leases"`
	Completed         int            `json:"completed"`
	Completions       int            `json:"completions"`
	DoubleCompletions int            `json:"double_completions"`
	OverlappingLeases int            `json:"overlapping_leases"`
	WastedAttempts    int            `json:"wasted_attempts"`
	Expired           int            `json:"expired"`
	Released          int            `json:"released"`
	Cancelled         int            `json:"cancelled"`
	Retried           int            `json:"retried"`
	Failed            int            `json:"failed"`
	AttemptsPerLead   map[string]int `json:"attempts_per_lead"` // leads by the number of leases they took
	Owners            []OwnerReport  `json:"owners"`
}

// OwnerReport is one worker's part of a session's audit.
type OwnerReport struct {
	Owner       string `json:"owner"`
	Leases      int    `json:"leases"`
	Completions int    `json:"completions"`
	Wasted      int    `json:"wasted"` // its leases that ended without a completion
}

// Report is the session's audit from the ledger.
func (q *Queue) Report(ctx context.Context, session string) (Report, error) {
	path, err := sessionPath(session, "/report")
	if err != nil {
		return Report{}, err
	}
	var report Report
	err = q.do(ctx, call{method: "GET", path: path}, &report)
	return report, err
}

// Scaling is a session's signal to scale workers on.
type Scaling struct {
	Session            string         `json:"session"`
	Backlog            int            `json:"backlog"`
	Leased             int            `json:"leased"`
	OldestAvailableAge *time.Duration `json:"-"`
	CompletionsPerS    float64        `json:"completions_per_s"`
	SuggestedWorkers   int            `json:"suggested_workers"`
}

// Scaling answers how many workers would bring the session's wait to
// targetWait (0: the service's 60 s), from its backlog and its completions
// over the last minute.
func (q *Queue) Scaling(ctx context.Context, session string, targetWait time.Duration) (Scaling, error) {
	path, err := sessionPath(session, "/scaling")
	if err != nil {
		return Scaling{}, err
	}
	var query url.Values
	if targetWait != 0 {
		query = url.Values{"target_wait_s": {strconv.FormatFloat(seconds(targetWait), 'f', -1, 64)}}
	}
	var answer struct {
		Scaling
		OldestAvailableAgeS *float64 `json:"oldest_available_age_s"`
	}
	if err := q.do(ctx, call{method: "GET", path: path, query: query}, &answer); err != nil {
		return Scaling{}, err
	}
	if answer.OldestAvailableAgeS != nil {
		age := duration(*answer.OldestAvailableAgeS)
		answer.Scaling.OldestAvailableAge = &age
	}
	return answer.Scaling, nil
}

// Token is a scoped API token as the service lists it; Token (the bearer
// token itself) only in CreateToken's answer: the service keeps a hash.
type Token struct {
	Name       string    `json:"name"`
	Role       string    `json:"role"`
	Sessions   string    `json:"sessions"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	RevokedAt  time.Time `json:"revoked_at"`
	Token      string    `json:"token"`
}

// NewToken asks for a scoped token: Role (producer, worker, operator or
// reader), Sessions (a session name, optionally ending in *, or *), Name
// ("": made up) and Expires (0: never).
type NewToken struct {
	Name     string
	Role     string
	Sessions string
	Expires  time.Duration
}

// CreateToken makes a scoped token; its answer holds the bearer token, once.
// It is sent once, never retried: a repeat whose first answer was lost would
// make a second token.
func (q *Queue) CreateToken(ctx context.Context, t NewToken) (Token, error) {
	body := map[string]any{"role": t.Role, "sessions": t.Sessions}
	if t.Name != "" {
		body["name"] = t.Name
	}
	if t.Expires != 0 {
		body["expires_s"] = seconds(t.Expires)
	}
	var token Token
	err := q.do(ctx, call{method: "POST", path: "/tokens", body: body, policy: &noRetry}, &token)
	return token, err
}

// Tokens lists every token, newest first (never a bearer token).
func (q *Queue) Tokens(ctx context.Context) ([]Token, error) {
	var answer struct {
		Tokens []Token `json:"tokens"`
	}
	err := q.do(ctx, call{method: "GET", path: "/tokens"}, &answer)
	return answer.Tokens, err
}

// RevokeToken ends the live token of this name, in every API process at once.
func (q *Queue) RevokeToken(ctx context.Context, name string) (Token, error) {
	if !sessionPattern.MatchString(name) {
		return Token{}, invalid("a token's name is spelled as a session's, not %q", name)
	}
	var token Token
	err := q.do(ctx, call{method: "DELETE", path: "/tokens/" + url.PathEscape(name)}, &token)
	return token, err
}

// Ready is nil once the service answers /readyz: its database answers and its
// schema is at head.
func (q *Queue) Ready(ctx context.Context) error {
	return q.do(ctx, call{method: "GET", path: "/readyz", policy: &noRetry}, nil)
}
