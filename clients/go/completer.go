package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The completer: completions that come close together go in one
// /complete/batch, which leases the next leads for the slots it frees
// (next) under one Idempotency-Key that its retries repeat.
//
// One request is in flight at a time; the completions that arrive meanwhile
// wait for the next, so the batch grows with the load and a lone completion
// goes at once. A lead's slot is free again only once its completion is
// answered: the next leads asked for are those the batch frees and no lease
// call in flight has asked for already, so the worker never holds more than
// its slots and its prefetch. The answer's leases are timed from the
// request's first send, and each item's answer goes to its own lead: a lease
// found lost stops exactly that lead.

type completer struct {
	pending  []*completion
	wake     chan struct{}
	inFlight int // requests at once
	sending  int // completions in the requests in flight: their slots free as they are answered
}

const maxInFlight = 16

func (c *completer) init(inFlight int) {
	c.wake = make(chan struct{}, 1)
	c.inFlight = inFlight
}

// completion is one lead's completion, waiting for its answer.
type completion struct {
	h      *held
	item   completeItemJSON
	answer chan completionAnswer
}

// completionAnswer: ok; refused (the service would not take the request,
// nothing changed: a result too large, say); or neither (the lease was lost,
// or the service out of reach until it ran out: counted lost).
type completionAnswer struct {
	ok      bool
	refused *Error
}

// complete queues a completion for the completer and waits for its answer.
func (w *Worker) complete(h *held, status LeadStatus, result json.RawMessage, why string) completionAnswer {
	c := &completion{
		h:      h,
		item:   completeItemJSON{LeadID: h.lease.Lead.ID, Token: h.lease.Token, Status: status, Result: result, Error: why},
		answer: make(chan completionAnswer, 1),
	}
	w.mu.Lock()
	w.completing.pending = append(w.completing.pending, c)
	w.mu.Unlock()
	signal(w.completing.wake)
	return <-c.answer
}

// completer sends the pending completions, a batch at a time, up to
// inFlight requests at once, until the run ends.
func (w *Worker) completer(finished <-chan struct{}) {
	sending := 0
	done := make(chan struct{}, maxInFlight)
	for {
		select {
		case <-w.completing.wake:
		case <-done:
			sending--
		case <-finished:
			return
		}
		for sending < w.completing.inFlight {
			w.mu.Lock()
			n := len(w.completing.pending)
			if n > maxItemBatch {
				n = maxItemBatch
			}
			batch := append([]*completion(nil), w.completing.pending[:n]...)
			w.completing.pending = w.completing.pending[n:]
			w.mu.Unlock()
			if n == 0 {
				break
			}
			sending++
			go func() {
				w.sendCompletions(batch)
				done <- struct{}{}
			}()
		}
	}
}

// sendCompletions sends one batch, retried under its key while a lease of it
// is surely valid, and gives each completion its answer.
func (w *Worker) sendCompletions(batch []*completion) {
	w.mu.Lock()
	w.completing.sending += len(batch)
	free := 0
	if !w.stopping {
		free = w.capacity() - len(w.held) - w.reserved + w.completing.sending
		if free > maxLeaseMax {
			free = maxLeaseMax
		}
		if free < 0 {
			free = 0
		}
		w.reserved += free
	}
	w.mu.Unlock()
	body := struct {
		Items []completeItemJSON `json:"items"`
		Next  *leaseRequestJSON  `json:"next,omitempty"`
	}{Items: make([]completeItemJSON, len(batch))}
	for i, c := range batch {
		body.Items[i] = c.item
	}
	key := ""
	if free > 0 {
		body.Next = &leaseRequestJSON{Session: w.sessions.session, Sessions: w.sessions.sessions, Owner: w.owner, Max: free, TTLS: seconds(w.ttl)}
		key = newKey()
	}
	raw, err := json.Marshal(body)
	if err != nil { // each result was checked already: cannot happen
		w.answer(batch, nil, nil, free, time.Time{}, &Error{Code: "validation_error", Detail: err.Error()})
		return
	}
	sent := time.Now()
	for retry := 0; ; retry++ {
		timeout := time.Until(w.latest(batch))
		if timeout > w.q.timeout {
			timeout = w.q.timeout
		}
		if timeout < minCallTimeout {
			timeout = minCallTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		results, leases, err := w.q.sendCompleteBatch(ctx, raw, key, timeout, &noRetry)
		cancel()
		if err == nil && len(results) != len(batch) {
			err = &Error{Status: 200, Code: "api_error", Detail: "the batch answered a different number of results"}
		}
		if err == nil {
			w.answer(batch, results, leases, free, sent, nil)
			return
		}
		if !unreachable(err) && !errors.Is(err, context.DeadlineExceeded) {
			if len(batch) > 1 && (errors.Is(err, ErrValidation) || errors.Is(err, ErrPayloadTooLarge)) {
				// Refused whole, nothing changed: one item's result, say. Each goes alone.
				w.mu.Lock()
				w.unreserve(free)
				w.completing.sending -= len(batch)
				w.mu.Unlock()
				for _, c := range batch {
					w.sendCompletions([]*completion{c})
				}
				return
			}
			w.answer(batch, nil, nil, free, sent, err)
			return
		}
		delay := w.q.retry.Delay(retry, retryAfterIn(err))
		if !time.Now().Add(delay).Before(w.latest(batch)) {
			w.logf("completion of %d leads not answered until their leases ran out: %v", len(batch), err)
			w.answer(batch, nil, nil, free, sent, err)
			return
		}
		time.Sleep(delay)
	}
}

// latest is until when the last lease of the batch is surely valid.
func (w *Worker) latest(batch []*completion) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var latest time.Time
	for _, c := range batch {
		if c.h.validUntil.After(latest) {
			latest = c.h.validUntil
		}
	}
	return latest
}

// answer hands each completion its answer (err: the batch's failure), frees
// the slots of those answered, and holds the leases the batch took, in one
// step: the lease loop never sees the slots freed without the leases that
// fill them.
func (w *Worker) answer(batch []*completion, results []ItemResult, leases []*Lease, reserved int, sent time.Time, err error) {
	answers := make([]completionAnswer, len(batch))
	w.mu.Lock()
	w.unreserve(reserved)
	w.completing.sending -= len(batch)
	for i, c := range batch {
		switch {
		case err == nil && results[i].OK:
			answers[i].ok = true
		case err == nil:
			w.logf("lead %d: its completion found the lease lost (%s)", c.h.lease.Lead.ID, results[i].Code)
		default:
			var refused *Error
			if errors.As(err, &refused) && (refused.Is(ErrValidation) || refused.Is(ErrPayloadTooLarge)) {
				answers[i].refused = refused
				continue // the lead is still held: it is failed or released next
			}
			w.logf("lead %d: its completion was not taken: %v", c.h.lease.Lead.ID, err)
		}
		w.forget(c.h)
	}
	received := time.Now()
	for _, lease := range leases {
		w.start(lease, sent, received)
	}
	for i := range batch {
		if !answers[i].ok && answers[i].refused == nil {
			w.stats.Lost++
		}
	}
	w.mu.Unlock()
	for i, c := range batch {
		c.answer <- answers[i]
	}
}
