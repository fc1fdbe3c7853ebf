package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Settling a lead: what its handler's outcome calls for, sent, and never
// anything for a lost or abandoned lease.
//
//   - a result: completed done (CachedResult: cached), through the
//     completer, which sends the completions that come close together in
//     one request leasing the next leads (completer.go);
//   - an error, or the maximum runtime: released with a backoff while
//     attempts remain, else completed as failed;
//   - ThrottleError: released with a throttle (the session pauses, no
//     attempt used); ErrHandlerUnusable: released, and the worker stops;
//   - the worker stopping: released for another worker; a lead whose
//     handler never started (prefetched) is released unstarted, so it
//     spends no attempt (plainly, once the service refuses the field).
//
// A checkpoint no renewal carried yet rides on one more renewal before a
// lead is given back. A release is retried while the lease is surely valid:
// a repeat finds the lease given back and changes nothing.

const maxErrorChars = 65536 // a completion's or release's error, as the service takes it

func (w *Worker) settle(h *held, e ended) {
	lease := h.lease
	switch e.outcome {
	case outAbandoned:
		w.count(func(s *WorkerStats) { s.Abandoned++ })
		return
	case outLost:
		w.lost(h, "its lease may be gone")
		return
	case outUnusable:
		w.logf("lead %d: %v; releasing it and stopping", lease.Lead.ID, e.err)
		w.end(e.err) // first: no lease may take it again meanwhile
		w.giveBack(h, ReleaseOptions{Error: errorText(e.err.Error())})
		return
	case outThrottled:
		throttle := e.throttle
		if throttle < time.Second {
			throttle = time.Second
		} else if throttle > time.Hour {
			throttle = time.Hour
		}
		w.logf("lead %d: throttled, its session pauses for %v", lease.Lead.ID, throttle)
		w.giveBack(h, ReleaseOptions{Error: "throttled", Throttle: throttle})
		return
	case outShutdown:
		w.mu.Lock()
		unstarted := h.started.IsZero() && !w.plainReleases
		w.mu.Unlock()
		w.giveBack(h, ReleaseOptions{Error: string(StopShutdown), Unstarted: unstarted})
		return
	case outDone, outCached:
		status := Done
		if e.outcome == outCached {
			status = Cached
		}
		result, err := jsonValue(e.result, "the result")
		if err != nil {
			w.fail(h, fmt.Sprintf("the result is not JSON: %v", err))
			return
		}
		switch answer := w.complete(h, status, result, ""); {
		case answer.ok:
			w.finished(status)
		case answer.refused != nil:
			w.fail(h, "the result was refused: "+answer.refused.Detail)
		}
		return
	}
	w.fail(h, e.err.Error())
}

// fail retries the lead later while attempts remain, else completes it as failed.
func (w *Worker) fail(h *held, why string) {
	lease := h.lease
	why = errorText(why)
	w.count(func(s *WorkerStats) { s.Errors++ })
	if lease.Attempt < lease.Lead.MaxAttempts {
		delay := w.retryDelay(lease.Attempt)
		if delay < 0 {
			delay = 0
		}
		w.logf("lead %d attempt %d failed, retry in %v: %s", lease.Lead.ID, lease.Attempt, delay.Round(time.Millisecond), why)
		w.giveBack(h, ReleaseOptions{Delay: delay, Error: why})
		return
	}
	w.logf("lead %d failed after %d attempts: %s", lease.Lead.ID, lease.Attempt, why)
	if w.complete(h, Failed, nil, why).ok {
		w.finished(Failed)
	}
}

// giveBack releases the lead (after its last checkpoint), retried while its
// lease is surely valid; once the worker is stopping, not while a lease call
// of its own is in flight.
func (w *Worker) giveBack(h *held, opts ReleaseOptions) {
	w.mu.Lock()
	w.untilUnasked()
	w.mu.Unlock()
	w.carryCheckpoint(h)
	id, token := h.lease.Lead.ID, h.lease.Token
	err := w.whileValid(h, func(ctx context.Context) error {
		_, err := w.q.release(ctx, id, token, opts)
		if err != nil && opts.Unstarted && refusedField(err, "unstarted") {
			w.logf("the service counts every release as an attempt (%v)", err)
			w.mu.Lock()
			w.plainReleases = true
			w.mu.Unlock()
			opts.Unstarted = false
			_, err = w.q.release(ctx, id, token, opts)
		}
		return err
	})
	switch {
	case err == nil:
		w.count(func(s *WorkerStats) { s.Released++ })
	case isLost(err):
		w.lost(h, "its release found the lease lost")
	default:
		w.lost(h, fmt.Sprintf("its release was not sent: %v", err))
	}
}

// whileValid sends a release (or a last checkpoint) until it is answered,
// retrying while the lease is surely valid; each try ends when the lease
// may have.
func (w *Worker) whileValid(h *held, send func(ctx context.Context) error) error {
	for retry := 0; ; retry++ {
		w.mu.Lock()
		validUntil := h.validUntil
		w.mu.Unlock()
		ctx, cancel := context.WithDeadline(context.Background(), validUntil)
		err := send(ctx)
		cancel()
		if err == nil || (!unreachable(err) && !errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		delay := w.q.retry.Delay(retry, retryAfterIn(err))
		w.mu.Lock()
		validUntil = h.validUntil // a renewal may have pushed it on
		w.mu.Unlock()
		if !time.Now().Add(delay).Before(validUntil) {
			return fmt.Errorf("the service was out of reach until the lease ran out (%v)", err)
		}
		time.Sleep(delay)
	}
}

// carryCheckpoint sends a checkpoint no renewal carried yet on one more
// renewal, before the lead is given back, so the next holder resumes from
// it. A failure is only logged: the release says the rest.
func (w *Worker) carryCheckpoint(h *held) {
	w.mu.Lock()
	checkpoint, version := h.unsentCheckpoint()
	item := renewJSON{LeadID: h.lease.Lead.ID, Token: h.lease.Token, TTLS: seconds(h.ttl), Checkpoint: checkpoint}
	w.mu.Unlock()
	if checkpoint == nil {
		return
	}
	raw, _ := json.Marshal(struct {
		Items []renewJSON `json:"items"`
	}{[]renewJSON{item}})
	err := w.whileValid(h, func(ctx context.Context) error {
		results, err := w.q.sendRenewBatch(ctx, raw, 0, nil)
		if err == nil && !results[0].OK {
			err = &Error{Code: results[0].Code}
		}
		return err
	})
	if err != nil {
		w.logf("lead %d: its last checkpoint was not stored: %v", h.lease.Lead.ID, err)
		return
	}
	w.mu.Lock()
	if version > h.checkpointSent {
		h.checkpointSent = version
	}
	w.mu.Unlock()
}

func (w *Worker) finished(status LeadStatus) {
	w.count(func(s *WorkerStats) {
		switch status {
		case Done:
			s.Done++
		case Cached:
			s.Cached++
		case Failed:
			s.Failed++
		}
	})
}

func (w *Worker) lost(h *held, why string) {
	w.count(func(s *WorkerStats) { s.Lost++ })
	w.logf("lead %d: %s; nothing sent", h.lease.Lead.ID, why)
}

func (w *Worker) count(change func(*WorkerStats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(&w.stats)
}

// errorText is an attempt's error as the service takes it: no NUL (PostgreSQL
// text has none), at most maxErrorChars characters.
func errorText(text string) string {
	text = strings.ReplaceAll(text, "\x00", "")
	if text == "" {
		return "failed"
	}
	if runes := []rune(text); len(runes) > maxErrorChars {
		return string(runes[:maxErrorChars])
	}
	return text
}
