package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"
)

// The heartbeat: every lease in flight renewed on its schedule (held.go),
// those due together in one /renew/batch, each call's timeout what is left
// before the first of its leases must stop, never retried by the client
// itself (a retry is the next beat, soon after a failure, or after the
// answer's Retry-After while the lease leaves time for it). A renewal
// answered lost cancels its handler at once. A checkpoint the handler set
// rides on its lease's next renewal; one the service refuses (too large,
// too deep) is dropped and logged, since it would fail every renewal it
// rides on.

const logEvery = 5 * time.Second // a failing heartbeat says so at most this often

func (w *Worker) heartbeat(finished <-chan struct{}) {
	var failingSince, lastSaid time.Time
	for {
		w.mu.Lock()
		now := time.Now()
		var live []*held
		var nextAt time.Time
		for h := range w.held {
			if h.gone || h.abandoned || h.reason.leaseGone() {
				continue
			}
			live = append(live, h)
			if nextAt.IsZero() || h.renewAt.Before(nextAt) {
				nextAt = h.renewAt
			}
		}
		if len(live) == 0 || nextAt.After(now) {
			w.beatAt = nextAt
			if len(live) == 0 {
				w.beatAt = now.Add(time.Hour) // asleep until a lease wakes it
			}
			w.mu.Unlock()
			timer := time.NewTimer(w.beatAt.Sub(now))
			select {
			case <-timer.C:
			case <-w.beatWake:
			case <-finished:
				timer.Stop()
				return
			}
			timer.Stop()
			w.mu.Lock()
			w.beatAt = time.Time{} // awake: it looks at every lease before it sleeps again
			w.mu.Unlock()
			continue
		}
		// Those due within a sixth of their ttl go along: an early renewal costs nothing.
		var batch []*held
		for _, h := range live {
			if h.renewAt.Before(now.Add(h.ttl / 6)) {
				batch = append(batch, h)
			}
		}
		sort.Slice(batch, func(i, j int) bool { return batch[i].renewAt.Before(batch[j].renewAt) })
		if len(batch) > maxItemBatch {
			batch = batch[:maxItemBatch]
		}
		items := make([]renewJSON, len(batch))
		versions := make([]int, len(batch))
		neededBy := batch[0].neededBy()
		for i, h := range batch {
			checkpoint, version := h.unsentCheckpoint()
			items[i] = renewJSON{LeadID: h.lease.Lead.ID, Token: h.lease.Token, TTLS: seconds(h.ttl), Checkpoint: checkpoint}
			versions[i] = version
			if h.neededBy().Before(neededBy) {
				neededBy = h.neededBy()
			}
		}
		w.mu.Unlock()

		err := w.renew(batch, items, versions, neededBy)
		if err == nil {
			failingSince = time.Time{}
			continue
		}
		now = time.Now()
		if failingSince.IsZero() {
			failingSince = now
		}
		if now.Sub(lastSaid) >= logEvery {
			lastSaid = now
			w.logf("renewal of %d leases failing for %v (%v); retrying while time remains", len(batch), now.Sub(failingSince).Round(time.Millisecond), err)
		}
	}
}

// renew sends one /renew/batch and applies its answers; on a failure each
// lease of the batch is tried again soon.
func (w *Worker) renew(batch []*held, items []renewJSON, versions []int, neededBy time.Time) error {
	sent := time.Now()
	timeout := neededBy.Sub(sent)
	if timeout > w.q.timeout {
		timeout = w.q.timeout
	}
	if timeout < minCallTimeout {
		timeout = minCallTimeout
	}
	raw, err := json.Marshal(struct {
		Items []renewJSON `json:"items"`
	}{items})
	var results []ItemResult
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		results, err = w.q.sendRenewBatch(ctx, raw, timeout, &noRetry)
		cancel()
		if err == nil && len(results) != len(batch) {
			err = &Error{Status: 200, Code: "api_error", Detail: "the batch answered a different number of results"}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		now := time.Now()
		w.dropRefusedCheckpoints(err, batch, versions)
		for _, h := range batch {
			h.renewFailed(now, retryAfterIn(err))
		}
		return err
	}
	for i, h := range batch {
		r := results[i]
		switch {
		case r.OK:
			ttl := r.TTL
			if ttl <= 0 {
				ttl = h.ttl
			}
			h.renewed(sent, ttl)
			if r.Fence != "" {
				h.fence = r.Fence
			}
			if versions[i] > h.checkpointSent {
				h.checkpointSent = versions[i]
			}
		case h.settling:
			h.renewAt = sent.Add(24 * time.Hour) // its complete or release will hear it is lost
		default:
			h.interrupt(StopLost)
		}
	}
	return nil
}

// dropRefusedCheckpoints: a 422 on a renewal that carried checkpoints is taken
// as theirs (the rest of a renewal the worker builds is valid): each is
// dropped and logged, and the leases are renewed without them. Called with mu held.
func (w *Worker) dropRefusedCheckpoints(err error, batch []*held, versions []int) {
	if !errors.Is(err, ErrValidation) && !errors.Is(err, ErrPayloadTooLarge) {
		return
	}
	for i, h := range batch {
		if versions[i] > h.checkpointSent {
			h.checkpointSent = versions[i]
			w.logf("lead %d: its checkpoint was refused (%v); dropped", h.lease.Lead.ID, err)
		}
	}
}
