package leaseq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// The API of the queue package leaseq grew from, over REST: Push, LeaseNext,
// Renew, Complete, Release, Sweep and Stats. A program written against it
// moves to leaseq by changing its import and its constructor (New).

// The contract's limits the client packs its calls under.
const (
	maxPushBatch = 1000        // leads in one push
	maxBodyBytes = 1024 * 1024 // the service's default LEASEQ_MAX_BODY_BYTES
	maxItemBatch = 100         // items of one /renew/batch or /complete/batch
	maxLeaseMax  = 100         // `max` of one lease
	maxWait      = 30 * time.Second
)

var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// sessionPath is the URL path of a session's resource, or an error for a name
// the contract does not allow (it would name another path).
func sessionPath(session, rest string) (string, error) {
	if !sessionPattern.MatchString(session) {
		return "", invalid("a session's name must match %s, not %q", sessionPattern, session)
	}
	return "/sessions/" + url.PathEscape(session) + rest, nil
}

func leadPath(id int64, rest string) (string, error) {
	if id < 1 {
		return "", invalid("a lead id is a positive integer, not %d", id)
	}
	return "/leads/" + strconv.FormatInt(id, 10) + rest, nil
}

// Push adds leads to the queue, each to the session its SessionID names, and
// sets each one's ID. A lead whose Key is already in its session is not
// pushed again: its existing lead's id is set instead.
//
// Each call of up to 1,000 leads (and 1 MiB) carries an Idempotency-Key that
// its retries repeat, so a push whose answer was lost is not made twice.
// Calls are made in order; an error leaves the leads of the calls before it
// pushed (and their IDs set), and none of its own or after.
func (q *Queue) Push(ctx context.Context, leads []Lead) error {
	_, err := q.PushIDs(ctx, leads)
	return err
}

// PushResult is what a push answered: the ids in the order given (a
// duplicate's existing id in its place), and how many leads were created and
// how many were duplicates of a key already in their session.
type PushResult struct {
	IDs        []int64
	Created    int
	Duplicates int
}

// PushIDs is Push, answering the ids and counts of every call it made.
func (q *Queue) PushIDs(ctx context.Context, leads []Lead) (PushResult, error) {
	return q.PushKeyed(ctx, "", leads)
}

// PushKeyed is PushIDs under the caller's Idempotency-Key: the first call
// carries key, the next ones key.1, key.2 … ("" : a fresh key per call), each
// repeated by its retries. A producer whose push failed with no answer (its
// retries ran out) asks Pushed with the key whether it was stored after all,
// and sends it again with the same key if it was not: it is never stored twice.
func (q *Queue) PushKeyed(ctx context.Context, key string, leads []Lead) (PushResult, error) {
	result := PushResult{IDs: make([]int64, 0, len(leads))}
	bodies := make([]json.RawMessage, len(leads))
	for i := range leads {
		body, err := newLeadBody(&leads[i])
		if err != nil {
			return result, err
		}
		bodies[i] = body
	}
	calls := 0
	for start := 0; start < len(leads); {
		session := leads[start].SessionID
		path, err := sessionPath(session, "/leads")
		if err != nil {
			return result, err
		}
		end, raw := pushBody(leads, bodies, start)
		var answer struct {
			IDs        []int64 `json:"ids"`
			Created    int     `json:"created"`
			Duplicates int     `json:"duplicates"`
		}
		c := call{method: "POST", path: path, raw: raw, key: callKey(key, calls)}
		calls++
		if err := q.do(ctx, c, &answer); err != nil {
			return result, err
		}
		if len(answer.IDs) != end-start {
			return result, &Error{Status: 201, Code: "api_error", Detail: "the push answered a different number of ids"}
		}
		for i, id := range answer.IDs {
			leads[start+i].ID = id
		}
		result.IDs = append(result.IDs, answer.IDs...)
		result.Created += answer.Created
		result.Duplicates += answer.Duplicates
		start = end
	}
	return result, nil
}

// callKey is the Idempotency-Key of a push's n-th call: key, key.1, key.2 …;
// a fresh one when key is "".
func callKey(key string, n int) string {
	if key == "" {
		return newKey()
	}
	if n == 0 {
		return key
	}
	return key + "." + strconv.Itoa(n)
}

// Pushed is what the push into session sent with the Idempotency-Key key
// answered (its lead ids), or nil when no such push was stored: then it may be
// sent again under the same key. A push still running is seen once it commits.
func (q *Queue) Pushed(ctx context.Context, session, key string) (*PushResult, error) {
	path, err := sessionPath(session, "/pushes/"+url.PathEscape(key))
	if err != nil {
		return nil, err
	}
	var answer struct {
		IDs        []int64 `json:"ids"`
		Created    int     `json:"created"`
		Duplicates int     `json:"duplicates"`
	}
	if err := q.do(ctx, call{method: "GET", path: path}, &answer); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return &PushResult{IDs: answer.IDs, Created: answer.Created, Duplicates: answer.Duplicates}, nil
}

// pushBody is the body of the call that pushes leads[start:end]: the leads of
// one session in a row, at most maxPushBatch of them and maxBodyBytes (a
// lead too large for any body goes alone, for the service to refuse).
func pushBody(leads []Lead, bodies []json.RawMessage, start int) (int, []byte) {
	var buf bytes.Buffer
	buf.WriteString(`{"leads":[`)
	end := start
	for end < len(leads) && leads[end].SessionID == leads[start].SessionID && end-start < maxPushBatch {
		if end > start && buf.Len()+1+len(bodies[end])+2 > maxBodyBytes {
			break
		}
		if end > start {
			buf.WriteByte(',')
		}
		buf.Write(bodies[end])
		end++
	}
	buf.WriteString("]}")
	return end, buf.Bytes()
}

// newLeadJSON is a lead of a push on the wire; a zero field is left out (the
// service's default).
type newLeadJSON struct {
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority,omitempty"`
	Key            string          `json:"key,omitempty"`
	Depth          int             `json:"depth,omitempty"`
	ParentID       int64           `json:"parent_id,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	DelayS         float64         `json:"delay_s,omitempty"`
	ConcurrencyKey string          `json:"concurrency_key,omitempty"`
	MaxRuntimeS    int             `json:"max_runtime_s,omitempty"`
	Traceparent    string          `json:"traceparent,omitempty"`
	After          []any           `json:"after,omitempty"`
}

func newLeadBody(l *Lead) (json.RawMessage, error) {
	payload := l.Payload
	if payload == nil {
		payload = json.RawMessage("{}")
	}
	wire := newLeadJSON{
		Payload: payload, Priority: l.Priority, Key: l.Key, Depth: l.Depth, ParentID: l.ParentID,
		MaxAttempts: l.MaxAttempts, DelayS: seconds(l.Delay), ConcurrencyKey: l.ConcurrencyKey,
		MaxRuntimeS: l.MaxRuntimeS, Traceparent: l.Traceparent,
	}
	for _, id := range l.After {
		wire.After = append(wire.After, id)
	}
	for _, key := range l.AfterKeys {
		wire.After = append(wire.After, map[string]string{"key": key})
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return nil, invalid("the lead's payload is not JSON: %v", err)
	}
	return body, nil
}

// LeaseNext claims the highest-priority queued lead of the session (the
// oldest first among equals) for owner, or returns nil, nil when none is
// available. An empty sessionID leases from any session (the one furthest
// below its fair share). The lease is the queue's TTL; its request carries an
// Idempotency-Key that its retries repeat, so a lost answer costs no lease.
func (q *Queue) LeaseNext(ctx context.Context, sessionID, owner string) (*Lease, error) {
	leases, err := q.Lease(ctx, LeaseRequest{Session: sessionID, Owner: owner, Max: 1})
	if err != nil || len(leases) == 0 {
		return nil, err
	}
	return leases[0], nil
}

// Renew extends a lease by its TTL, from now on the database's clock.
//
// It reports false when the lease is gone: swept as expired, cancelled, past
// its maximum runtime, and possibly already leased to another worker. A
// worker that keeps going after that is racing the one that now owns the
// lead, so the caller must stop rather than finish.
//
// It updates l's ExpiresAt, TTL and Fence (never l.Lead, which a handler may
// read meanwhile).
func (q *Queue) Renew(ctx context.Context, l *Lease) (bool, error) {
	return q.renew(ctx, l, nil)
}

// Checkpoint renews a lease carrying a checkpoint (any JSON but null): where
// the work got to. The service stores it on the lead and hands it to the
// next holder in its lease (Lead.Checkpoint) should this one lose it.
func (q *Queue) Checkpoint(ctx context.Context, l *Lease, checkpoint any) (bool, error) {
	raw, err := jsonValue(checkpoint, "the checkpoint")
	if err != nil {
		return false, err
	}
	if raw == nil {
		return false, invalid("a checkpoint cannot be null")
	}
	return q.renew(ctx, l, raw)
}

func (q *Queue) renew(ctx context.Context, l *Lease, checkpoint json.RawMessage) (bool, error) {
	if l == nil || l.Lead == nil {
		return false, invalid("no lease")
	}
	var answer struct {
		ExpiresAt time.Time `json:"expires_at"`
		TTLS      float64   `json:"ttl_s"`
		Fence     string    `json:"fence"`
	}
	body := renewJSON{LeadID: l.Lead.ID, Token: l.Token, TTLS: seconds(q.leaseTTL(l)), Checkpoint: checkpoint}
	if err := q.do(ctx, call{method: "POST", path: "/renew", body: body}, &answer); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return false, nil
		}
		return false, err
	}
	l.ExpiresAt, l.TTL = answer.ExpiresAt, duration(answer.TTLS)
	if answer.Fence != "" {
		l.Fence = answer.Fence
	}
	return true, nil
}

// leaseTTL is the ttl a renewal of l asks for: what its lease was granted.
func (q *Queue) leaseTTL(l *Lease) time.Duration {
	if l.TTL >= minTTL {
		return l.TTL
	}
	return q.ttl
}

type renewJSON struct {
	LeadID     int64           `json:"lead_id"`
	Token      string          `json:"token"`
	TTLS       float64         `json:"ttl_s,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// Complete marks a lead finished: Done, Failed or Cached. It returns
// ErrLeaseLost itself when the lease was taken before the completion reached
// the service (nothing was changed). It is safe to retry: the same completion
// again answers as the first did. On success l.Lead is the lead as finished.
func (q *Queue) Complete(ctx context.Context, l *Lease, status LeadStatus) error {
	_, err := q.CompleteWith(ctx, l, Completion{Status: status})
	if errors.Is(err, ErrLeaseLost) {
		return ErrLeaseLost
	}
	return err
}

// Release returns a lead to the queue without completing it. On the lead's
// last attempt it fails instead (the contract's invariant 7). It returns
// ErrLeaseLost itself when the lease was no longer valid.
func (q *Queue) Release(ctx context.Context, l *Lease) error {
	_, err := q.ReleaseWith(ctx, l, ReleaseOptions{})
	if errors.Is(err, ErrLeaseLost) {
		return ErrLeaseLost
	}
	return err
}

// Sweep requeues the session's leads whose lease has expired (those on their
// last attempt fail instead), and reports how many expired leases it ended.
// An empty sessionID sweeps every session (boot recovery). The service's own
// sweeper does this too; a sweep never touches a valid lease.
func (q *Queue) Sweep(ctx context.Context, sessionID string) (int, error) {
	swept, err := q.SweepCounts(ctx, sessionID)
	return swept.Requeued + swept.Failed, err
}

// SweepResult is what a sweep did: expired leases requeued, and failed (on
// their last attempt).
type SweepResult struct {
	Requeued, Failed int
}

// SweepCounts is Sweep, telling the requeued from the failed.
func (q *Queue) SweepCounts(ctx context.Context, sessionID string) (SweepResult, error) {
	body := map[string]any{"all": true}
	if sessionID != "" {
		if _, err := sessionPath(sessionID, ""); err != nil {
			return SweepResult{}, err
		}
		body = map[string]any{"session": sessionID}
	}
	var answer struct {
		Requeued int `json:"requeued"`
		Failed   int `json:"failed"`
	}
	err := q.do(ctx, call{method: "POST", path: "/sweep", body: body}, &answer)
	return SweepResult{answer.Requeued, answer.Failed}, err
}

// Stats counts the session's leads by status; an empty sessionID counts
// every session's together.
func (q *Queue) Stats(ctx context.Context, sessionID string) (Stats, error) {
	if sessionID == "" {
		all, err := q.StatsAll(ctx)
		return all.Total, err
	}
	path, err := sessionPath(sessionID, "/stats")
	if err != nil {
		return Stats{}, err
	}
	var answer statsJSON
	err = q.do(ctx, call{method: "GET", path: path}, &answer)
	return answer.stats(), err
}

// AllStats is every session's counts, and their total.
type AllStats struct {
	Sessions map[string]Stats
	Total    Stats
}

// StatsAll counts the leads of every session (a scoped token's own only).
func (q *Queue) StatsAll(ctx context.Context) (AllStats, error) {
	var answer struct {
		Sessions map[string]statsJSON `json:"sessions"`
		Total    statsJSON            `json:"total"`
	}
	if err := q.do(ctx, call{method: "GET", path: "/stats"}, &answer); err != nil {
		return AllStats{}, err
	}
	all := AllStats{Sessions: make(map[string]Stats, len(answer.Sessions)), Total: answer.Total.stats()}
	for name, counts := range answer.Sessions {
		all.Sessions[name] = counts.stats()
	}
	return all, nil
}

// jsonValue is v as JSON (a json.RawMessage as it is); nil for a nil v.
func jsonValue(v any, what string) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if raw == nil {
			return nil, nil
		}
		if !json.Valid(raw) {
			return nil, invalid("%s is not JSON", what)
		}
		return orNil(raw), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, invalid("%s is not JSON: %v", what, err)
	}
	return orNil(raw), nil
}
