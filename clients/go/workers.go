package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// What a worker beyond the queue API sends: leases of several leads at once
// (long-polled), renewals and completions in batches, a completion that
// leases the next leads in the same request, and releases with a delay, an
// error or a throttle.

// LeaseRequest asks for leases: the body of POST /lease, and a completion's
// next.
type LeaseRequest struct {
	Session  string        // lease from this session; or
	Sessions []string      // from whichever of these is furthest below its fair share; neither: any session
	Owner    string        // the worker's name (required)
	Max      int           // leads at most, 1 to 100; 0: 1
	TTL      time.Duration // the lease time; 0: the queue's TTL
	Wait     time.Duration // hold the request up to this long (30 s at most) until work arrives; 0: answer at once
}

type leaseRequestJSON struct {
	Session  string   `json:"session,omitempty"`
	Sessions []string `json:"sessions,omitempty"`
	Owner    string   `json:"owner"`
	Max      int      `json:"max"`
	TTLS     float64  `json:"ttl_s"`
	WaitS    float64  `json:"wait_s"`
}

func (q *Queue) leaseBody(r LeaseRequest) (leaseRequestJSON, error) {
	if r.Session != "" && r.Sessions != nil {
		return leaseRequestJSON{}, invalid("lease from Session or Sessions, not both")
	}
	if r.Sessions != nil && len(r.Sessions) == 0 {
		return leaseRequestJSON{}, invalid("Sessions is empty: name one, several, or none (nil) for any session")
	}
	body := leaseRequestJSON{Session: r.Session, Sessions: r.Sessions, Owner: r.Owner, Max: r.Max, TTLS: seconds(r.TTL), WaitS: seconds(r.Wait)}
	if r.Max == 0 {
		body.Max = 1
	}
	if r.TTL == 0 {
		body.TTLS = seconds(q.ttl)
	}
	return body, nil
}

// Lease leases up to r.Max available leads, highest priority first, and
// returns an empty slice when none is available (after r.Wait). The request
// carries an Idempotency-Key that its retries repeat: a retry gets the
// leases the first try took, never new ones.
func (q *Queue) Lease(ctx context.Context, r LeaseRequest) ([]*Lease, error) {
	body, err := q.leaseBody(r)
	if err != nil {
		return nil, err
	}
	var answer struct {
		Leases []leaseJSON `json:"leases"`
	}
	c := call{method: "POST", path: "/lease", body: body, key: newKey(), timeout: q.timeout + r.Wait}
	if err := q.do(ctx, c, &answer); err != nil {
		return nil, err
	}
	return leasesOf(answer.Leases), nil
}

// Completion is how a lease ends: its Status (Done when empty), its Result
// (any value encoding/json takes; a json.RawMessage as it is) and its Error
// (the reason of a failure).
type Completion struct {
	Status LeadStatus
	Result any
	Error  string
}

// CompleteItem is one completion of a batch: the lease's lead and token, and
// how it ends.
type CompleteItem struct {
	LeadID int64
	Token  string
	Completion
}

// ItemOf is the batch item that completes l as c says.
func ItemOf(l *Lease, c Completion) CompleteItem {
	return CompleteItem{LeadID: l.Lead.ID, Token: l.Token, Completion: c}
}

type completeItemJSON struct {
	LeadID int64           `json:"lead_id"`
	Token  string          `json:"token"`
	Status LeadStatus      `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

func completeItem(item CompleteItem) (completeItemJSON, error) {
	status := item.Status
	if status == "" {
		status = Done
	}
	if !status.Terminal() {
		return completeItemJSON{}, invalid("a completion's status is done, failed or cached, not %q", status)
	}
	result, err := jsonValue(item.Result, "the result")
	if err != nil {
		return completeItemJSON{}, err
	}
	return completeItemJSON{LeadID: item.LeadID, Token: item.Token, Status: status, Result: result, Error: item.Error}, nil
}

// CompleteWith completes a lease as c says and returns the lead as finished
// (l.Lead is updated too). An *Error that is ErrLeaseLost when the lease was
// no longer valid. Safe to retry: the same completion again answers as the
// first did.
func (q *Queue) CompleteWith(ctx context.Context, l *Lease, c Completion) (*Lead, error) {
	lead, _, err := q.complete(ctx, l, c, nil, "")
	return lead, err
}

// CompleteAndLease completes a lease and, once it is done, leases as next
// asks in the same request: a worker at steady state sends one request per
// lead. A refused completion (ErrLeaseLost) leases nothing. key is the
// Idempotency-Key of the lease it takes ("": a new one): the client's own
// retries repeat it, and a caller that retries the call itself passes the
// same key again, to get the same leases rather than new ones.
func (q *Queue) CompleteAndLease(ctx context.Context, l *Lease, c Completion, next LeaseRequest, key string) (*Lead, []*Lease, error) {
	return q.complete(ctx, l, c, &next, key)
}

func (q *Queue) complete(ctx context.Context, l *Lease, c Completion, next *LeaseRequest, key string) (*Lead, []*Lease, error) {
	if l == nil || l.Lead == nil {
		return nil, nil, invalid("no lease")
	}
	item, err := completeItem(ItemOf(l, c))
	if err != nil {
		return nil, nil, err
	}
	body := struct {
		completeItemJSON
		Next *leaseRequestJSON `json:"next,omitempty"`
	}{completeItemJSON: item}
	timeout := time.Duration(0)
	if next != nil {
		ask, err := q.leaseBody(*next)
		if err != nil {
			return nil, nil, err
		}
		body.Next, timeout = &ask, q.timeout+next.Wait
		if key == "" {
			key = newKey()
		}
	}
	var answer struct {
		Lead   *Lead       `json:"lead"`
		Leases []leaseJSON `json:"leases"`
	}
	if err := q.do(ctx, call{method: "POST", path: "/complete", body: body, key: key, timeout: timeout}, &answer); err != nil {
		return nil, nil, err
	}
	if answer.Lead != nil {
		*l.Lead = *answer.Lead
	}
	return answer.Lead, leasesOf(answer.Leases), nil
}

// CompleteBatch completes up to 100 leases in one request, and with next
// (non-nil) leases in the same request once they are done. Each item has its
// result in the order given (OK, or Code lease_lost); the leases come
// whatever the items' answers. key is the Idempotency-Key of the lease
// next takes, as for CompleteAndLease.
func (q *Queue) CompleteBatch(ctx context.Context, items []CompleteItem, next *LeaseRequest, key string) ([]ItemResult, []*Lease, error) {
	raw, timeout, err := q.completeBatchBody(items, next)
	if err != nil {
		return nil, nil, err
	}
	if next != nil && key == "" {
		key = newKey()
	}
	return q.sendCompleteBatch(ctx, raw, key, timeout, nil)
}

// completeBatchBody is the body of /complete/batch, and the timeout its next's wait needs.
func (q *Queue) completeBatchBody(items []CompleteItem, next *LeaseRequest) ([]byte, time.Duration, error) {
	if len(items) == 0 || len(items) > maxItemBatch {
		return nil, 0, invalid("a batch has 1 to %d items, not %d", maxItemBatch, len(items))
	}
	body := struct {
		Items []completeItemJSON `json:"items"`
		Next  *leaseRequestJSON  `json:"next,omitempty"`
	}{Items: make([]completeItemJSON, len(items))}
	for i, item := range items {
		wire, err := completeItem(item)
		if err != nil {
			return nil, 0, err
		}
		body.Items[i] = wire
	}
	timeout := time.Duration(0)
	if next != nil {
		ask, err := q.leaseBody(*next)
		if err != nil {
			return nil, 0, err
		}
		body.Next, timeout = &ask, q.timeout+next.Wait
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, 0, invalid("the batch is not JSON: %v", err)
	}
	return raw, timeout, nil
}

func (q *Queue) sendCompleteBatch(ctx context.Context, raw []byte, key string, timeout time.Duration, policy *RetryPolicy) ([]ItemResult, []*Lease, error) {
	var answer struct {
		Results []itemJSON  `json:"results"`
		Leases  []leaseJSON `json:"leases"`
	}
	c := call{method: "POST", path: "/complete/batch", raw: raw, key: key, timeout: timeout, policy: policy}
	if err := q.do(ctx, c, &answer); err != nil {
		return nil, nil, err
	}
	return resultsOf(answer.Results), leasesOf(answer.Leases), nil
}

// RenewItem is one renewal of a batch: the lease's lead and token, the ttl
// asked (0: the queue's TTL), and a checkpoint to store on the lead (nil:
// none; any JSON value but null).
type RenewItem struct {
	LeadID     int64
	Token      string
	TTL        time.Duration
	Checkpoint any
}

// RenewBatch renews up to 100 leases in one request; each item has its
// result in the order given: OK with its new expiry, TTL and Fence, or Code
// lease_lost.
func (q *Queue) RenewBatch(ctx context.Context, items []RenewItem) ([]ItemResult, error) {
	raw, err := q.renewBatchBody(items)
	if err != nil {
		return nil, err
	}
	return q.sendRenewBatch(ctx, raw, 0, nil)
}

func (q *Queue) renewBatchBody(items []RenewItem) ([]byte, error) {
	if len(items) == 0 || len(items) > maxItemBatch {
		return nil, invalid("a batch has 1 to %d items, not %d", maxItemBatch, len(items))
	}
	body := struct {
		Items []renewJSON `json:"items"`
	}{Items: make([]renewJSON, len(items))}
	for i, item := range items {
		checkpoint, err := jsonValue(item.Checkpoint, "the checkpoint")
		if err != nil {
			return nil, err
		}
		ttl := item.TTL
		if ttl == 0 {
			ttl = q.ttl
		}
		body.Items[i] = renewJSON{LeadID: item.LeadID, Token: item.Token, TTLS: seconds(ttl), Checkpoint: checkpoint}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, invalid("the batch is not JSON: %v", err)
	}
	return raw, nil
}

func (q *Queue) sendRenewBatch(ctx context.Context, raw []byte, timeout time.Duration, policy *RetryPolicy) ([]ItemResult, error) {
	var answer struct {
		Results []itemJSON `json:"results"`
	}
	c := call{method: "POST", path: "/renew/batch", raw: raw, timeout: timeout, policy: policy}
	if err := q.do(ctx, c, &answer); err != nil {
		return nil, err
	}
	return resultsOf(answer.Results), nil
}

// ReleaseOptions say how a lead is given back: not leased again for Delay;
// Error, the holder's reason (kept when this was its last attempt);
// Throttle, a cooldown ("the upstream answered 429"): the whole session
// pauses for it (1 s to 1 h), and this lease does not count against the
// lead's max_attempts.
type ReleaseOptions struct {
	Delay    time.Duration
	Error    string
	Throttle time.Duration
	// Unstarted says the holder never started the lead (it was prefetched):
	// this lease does not count against max_attempts, so the release cannot
	// fail the lead.
	Unstarted bool
}

// ReleaseWith gives a lease back as opts say and returns the lead (queued
// again, or failed on its last attempt; l.Lead is updated too). An *Error
// that is ErrLeaseLost when the lease was no longer valid.
func (q *Queue) ReleaseWith(ctx context.Context, l *Lease, opts ReleaseOptions) (*Lead, error) {
	if l == nil || l.Lead == nil {
		return nil, invalid("no lease")
	}
	lead, err := q.release(ctx, l.Lead.ID, l.Token, opts)
	if lead != nil {
		*l.Lead = *lead
	}
	return lead, err
}

func (q *Queue) release(ctx context.Context, leadID int64, token string, opts ReleaseOptions) (*Lead, error) {
	if opts.Throttle < 0 {
		return nil, invalid("a throttle is from 1s to 1h, not %v", opts.Throttle)
	}
	body := struct {
		LeadID    int64   `json:"lead_id"`
		Token     string  `json:"token"`
		DelayS    float64 `json:"delay_s"`
		Error     string  `json:"error,omitempty"`
		ThrottleS float64 `json:"throttle_s,omitempty"`
		Unstarted bool    `json:"unstarted,omitempty"`
	}{leadID, token, seconds(opts.Delay), opts.Error, seconds(opts.Throttle), opts.Unstarted}
	var answer struct {
		Lead *Lead `json:"lead"`
	}
	if err := q.do(ctx, call{method: "POST", path: "/release", body: body}, &answer); err != nil {
		return nil, err
	}
	return answer.Lead, nil
}

// refusedField reports whether err is a validation_error naming the body's
// field name (a service older than the field refuses it as unknown).
func refusedField(err error, name string) bool {
	var e *Error
	if !errors.As(err, &e) || e.Code != "validation_error" {
		return false
	}
	for _, f := range e.Fields {
		if len(f.Loc) > 0 && f.Loc[len(f.Loc)-1] == name {
			return true
		}
	}
	return false
}

// isLost reports whether err is a lease found no longer valid.
func isLost(err error) bool { return errors.Is(err, ErrLeaseLost) }
