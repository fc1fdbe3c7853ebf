package leaseq

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// One lead's life in a worker: confirmed if its lease came late, a slot
// waited for (a lead prefetched), its handler run until it returns or must
// stop, then settled (settle.go); whatever happens, it is no longer held at
// the end. Nothing here sends anything.

// outcome is how a handler's run ended, and so what the worker sends.
type outcome int

const (
	outDone      outcome = iota // complete as done
	outCached                   // complete as cached
	outError                    // release for a retry, or complete as failed on the last attempt
	outLost                     // the lease may be gone: send nothing
	outShutdown                 // release for another worker
	outAbandoned                // the handler would not stop: send nothing, let the lease expire
	outUnusable                 // the handler can run nothing: release, and stop the worker
	outThrottled                // release with a throttle: the session pauses, no attempt used
)

type ended struct {
	outcome  outcome
	result   any
	err      error
	throttle time.Duration
}

// hold is the goroutine of one lead held.
func (w *Worker) hold(h *held) {
	defer func() {
		w.mu.Lock()
		w.forget(h)
		w.mu.Unlock()
	}()
	e := w.execute(h)
	w.mu.Lock()
	h.settling = true
	w.mu.Unlock()
	w.settle(h, e)
}

// execute runs the handler once the lease is confirmed and a slot is free,
// until it returns, the lease may end, its time is up or the worker stops.
func (w *Worker) execute(h *held) ended {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !w.waitToRun(h, cancel) {
		return w.interrupted(h)
	}
	defer func() {
		w.mu.Lock()
		w.freeSlot(h)
		w.mu.Unlock()
	}()
	answers := make(chan ended, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				answers <- ended{outcome: outError, err: fmt.Errorf("the handler panicked: %v", r)}
			}
		}()
		result, err := w.handler(ctx, h.job)
		answers <- judge(result, err)
	}()
	for {
		w.mu.Lock()
		if h.reason == "" {
			if reason := h.due(time.Now(), w.maxRuntime); reason != "" {
				h.interrupt(reason)
			}
		}
		reason, deadline := h.reason, h.deadline(w.maxRuntime)
		w.mu.Unlock()
		if reason != "" {
			break
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case e := <-answers:
			timer.Stop()
			w.mu.Lock()
			lost := h.reason.leaseGone()
			w.mu.Unlock()
			if lost {
				return ended{outcome: outLost}
			}
			return e
		case <-h.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
	// Told to stop (its ctx is cancelled): it has its kill grace, and the margin.
	patience := time.NewTimer(h.killGrace + margin(h.ttl))
	defer patience.Stop()
	select {
	case <-answers:
	case <-patience.C:
		w.mu.Lock()
		h.abandoned = true
		reason := h.reason
		w.mu.Unlock()
		w.logf("lead %d: the handler did not return within %v of being told to stop (%s); it may still be running, so its lease is not released: it is left to expire",
			h.lease.Lead.ID, h.killGrace+margin(h.ttl), reason)
		return ended{outcome: outAbandoned}
	}
	return w.interrupted(h)
}

// waitToRun waits until the lease is confirmed and a handler slot is given
// to it (in the order the leads were leased); false when the lead must not
// run (interrupted, or its lease may have ended meanwhile). Once it runs,
// cancel is its ctx's.
func (w *Worker) waitToRun(h *held, cancel context.CancelFunc) bool {
	for {
		w.mu.Lock()
		if h.reason == "" {
			if reason := h.due(time.Now(), 0); reason != "" {
				h.interrupt(reason)
			}
		}
		if h.reason != "" {
			w.unqueue(h)
			w.mu.Unlock()
			return false
		}
		if h.confirmed && h.slot {
			h.started, h.cancel = time.Now(), cancel
			w.mu.Unlock()
			return true
		}
		if h.confirmed && !h.queued {
			h.queued = true
			w.waiting = append(w.waiting, h)
			w.grant()
			w.mu.Unlock()
			continue
		}
		deadline := h.deadline(0)
		w.mu.Unlock()
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-h.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// grant gives the free handler slots to the leads waiting, first come first
// served. Called with mu held.
func (w *Worker) grant() {
	for w.running < w.concurrency && len(w.waiting) > 0 {
		h := w.waiting[0]
		w.waiting = w.waiting[1:]
		h.queued = false
		if h.reason != "" || h.gone {
			continue
		}
		h.slot = true
		w.running++
		h.signal()
	}
}

// unqueue takes h out of the leads waiting for a slot, and gives back the
// slot it was given but did not use. Called with mu held.
func (w *Worker) unqueue(h *held) {
	if h.slot {
		w.freeSlot(h)
	}
	if !h.queued {
		return
	}
	h.queued = false
	for i, waiting := range w.waiting {
		if waiting == h {
			w.waiting = append(w.waiting[:i], w.waiting[i+1:]...)
			return
		}
	}
}

// freeSlot: h's handler is over; its slot goes to the next lead waiting.
// Called with mu held.
func (w *Worker) freeSlot(h *held) {
	if h.slot {
		h.slot = false
		w.running--
		w.grant()
	}
}

// interrupted is the outcome of a lead stopped before its handler returned.
func (w *Worker) interrupted(h *held) ended {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case h.reason.leaseGone():
		return ended{outcome: outLost}
	case h.reason == StopMaxRuntime:
		return ended{outcome: outError, err: fmt.Errorf("%s (%v)", StopMaxRuntime, w.maxRuntime)}
	default:
		return ended{outcome: outShutdown}
	}
}

// judge is the outcome of a handler that returned by itself.
func judge(result any, err error) ended {
	var throttle *ThrottleError
	switch {
	case errors.Is(err, ErrHandlerUnusable):
		return ended{outcome: outUnusable, err: err}
	case errors.As(err, &throttle):
		return ended{outcome: outThrottled, err: err, throttle: throttle.RetryAfter}
	case err != nil:
		return ended{outcome: outError, err: err}
	}
	switch cached := result.(type) {
	case CachedResult:
		return ended{outcome: outCached, result: cached.Value}
	case *CachedResult:
		return ended{outcome: outCached, result: cached.Value}
	}
	return ended{outcome: outDone, result: result}
}
