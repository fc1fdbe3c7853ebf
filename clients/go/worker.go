package leaseq

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"
)

// Worker leases leads of a session and runs a Handler on each, up to its
// concurrency at a time, keeping the promise of leaseq's workers
// (docs/worker.md): it never runs a lead it no longer holds, and never turns
// one intent into two effects.
//
//   - it leases into its free slots by long poll, and holds a few leads more
//     than it runs (prefetch) so that the next lead is there when a handler
//     ends; those are timed and renewed like any other, and given back at
//     a shutdown;
//   - it renews each lease a third of its ttl after the send of the last
//     confirmed renewal (those due together in one /renew/batch), timing a
//     lease from the send of its request, never from the service's clock;
//   - it cancels a handler's ctx when its lease is lost, when it may end
//     before a renewal is confirmed (a kill grace and a margin before), or
//     when its maximum runtime is over;
//   - handlers that finish close together are completed in one
//     /complete/batch that leases the next leads for the slots it frees
//     (next), under one Idempotency-Key that its retries repeat; a lead's
//     slot is free again only once its completion is confirmed;
//   - a handler's error releases the lead with a backoff while attempts
//     remain, and completes it as failed on its last;
//   - connection errors and 502, 503 and 504 answers are retried with
//     jittered backoff, honouring Retry-After;
//   - when Run's ctx ends, it leases no more, gives the handlers running its
//     grace to finish, then cancels them, and releases every lead it holds
//     and did not complete before Run returns.
type Worker struct {
	q           *Queue
	sessions    leaseScope
	handler     Handler
	owner       string
	concurrency int
	prefetch    int // -1: the default
	wait        time.Duration
	maxRuntime  time.Duration
	grace       time.Duration
	killGrace   time.Duration // -1: the default
	ttl         time.Duration // the lease it asks for: workerTTL
	retryDelay  func(attempt int) time.Duration
	untilEmpty  bool
	giveUpAfter time.Duration
	logger      *log.Logger

	mu         sync.Mutex
	held       map[*held]struct{}
	reserved   int        // slots a lease call in flight may fill (a long poll, a completion's next)
	unasked    *sync.Cond // broadcast when no lease call is in flight any more
	stopping   bool
	stoppedAt  time.Time
	stopCh     chan struct{} // closed when the worker stops leasing
	slotFreed  chan struct{} // a lead's slot was freed
	idle       chan struct{} // nothing is held any more
	waiting    []*held       // confirmed leads waiting for a handler slot, in order
	running    int           // handler slots given
	beatAt     time.Time     // when the heartbeat wakes by itself (zero: awake)
	beatWake   chan struct{}
	completing completer
	fatal      error
	stats      WorkerStats
	// plainReleases: the service refused "unstarted", so every release counts
	plainReleases bool
	ran           bool
}

// leaseScope is where a worker leases from: one session, several, or any.
type leaseScope struct {
	session  string
	sessions []string
}

// WorkerStats counts what a worker did.
type WorkerStats struct {
	Leased    int // leases taken
	Done      int // completed done
	Cached    int // completed cached
	Failed    int // completed failed (their last attempt failed)
	Released  int // given back: for a retry, at a shutdown, throttled
	Errors    int // handler errors (and maximum runtimes)
	Lost      int // leases found lost: nothing was sent for them
	Abandoned int // handlers that did not return when told: their leases were left to expire
}

// NewWorker makes a worker of q that leases from session ("": from any
// session; WithSessions: from several) and runs handler on each lead. Its
// leases are q's TTL.
func NewWorker(q *Queue, session string, handler Handler, opts ...WorkerOption) (*Worker, error) {
	if q == nil || handler == nil {
		return nil, invalid("a worker needs a queue and a handler")
	}
	if session != "" {
		if _, err := sessionPath(session, ""); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	w := &Worker{
		q: q, sessions: leaseScope{session: session}, handler: handler,
		owner: fmt.Sprintf("%s-%d", host, os.Getpid()), concurrency: 1, prefetch: -1,
		wait: DefaultWait, grace: DefaultGrace, killGrace: -1, retryDelay: DefaultRetryDelay,
		ttl:    workerTTL(q.TTL()),
		logger: log.New(os.Stderr, "leaseq: ", log.LstdFlags),
	}
	for _, opt := range opts {
		if err := opt(w); err != nil {
			return nil, err
		}
	}
	if w.prefetch < 0 {
		w.prefetch = 1
		if w.concurrency > 4 {
			w.prefetch = w.concurrency / 4
		}
	}
	return w, nil
}

// DefaultWorkerTTL is the lease a Worker asks for when its Queue keeps
// DefaultLeaseTTL: short, since its heartbeat renews every lease a third of
// its ttl in anyway, so a worker killed outright (SIGKILL, the OOM killer, a
// lost host) strands its leads for seconds, not five minutes
// (docs/worker.md#lease-length). A Queue made WithTTL gives its own.
const DefaultWorkerTTL = 30 * time.Second

// workerTTL is the lease a worker of a queue whose TTL is ttl asks for.
func workerTTL(ttl time.Duration) time.Duration {
	if ttl == DefaultLeaseTTL {
		return DefaultWorkerTTL
	}
	return ttl
}

// capacity is the most leases the worker holds: its slots and its prefetch.
func (w *Worker) capacity() int { return w.concurrency + w.prefetch }

// Stats is what the worker did so far.
func (w *Worker) Stats() WorkerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Run works until ctx ends (or, WithStopWhenEmpty, until the queue is
// empty), then gives back what it holds: running handlers get the grace to
// finish, then are cancelled, and every lead held and not completed is
// released before Run returns. It returns nil after such a stop, or what
// ended the run early: the service's refusal (unauthorized, forbidden, a
// bad session), ErrUnavailable after WithGiveUpAfter, or a handler's
// ErrHandlerUnusable. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.ran {
		w.mu.Unlock()
		return errors.New("leaseq: a Worker runs once")
	}
	w.ran = true
	w.held = map[*held]struct{}{}
	w.stopCh = make(chan struct{})
	w.slotFreed = make(chan struct{}, 1)
	w.idle = make(chan struct{}, 1)
	w.beatWake = make(chan struct{}, 1)
	w.completing.init(1)
	w.unasked = sync.NewCond(&w.mu)
	w.mu.Unlock()

	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			w.stop()
		case <-finished:
		}
	}()
	beating := make(chan struct{})
	go func() { defer close(beating); w.heartbeat(finished) }()
	completing := make(chan struct{})
	go func() { defer close(completing); w.completer(finished) }()

	w.leaseLoop()
	w.drain()
	w.mu.Lock()
	fatal := w.fatal
	w.mu.Unlock()
	return fatal
}

// stop makes the worker lease no more; running handlers get the grace, and
// leads not started are given back at once.
func (w *Worker) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return
	}
	w.stopping, w.stoppedAt = true, time.Now()
	close(w.stopCh)
	for h := range w.held {
		if h.started.IsZero() {
			h.interrupt(StopShutdown)
		}
	}
	w.logf("stopping: no new leases; %d in flight get %v", len(w.held), w.grace)
}

// end stops the run with err: no grace, what is held is given back at once.
func (w *Worker) end(err error) {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fatal == nil {
		w.fatal = err
	}
	w.stoppedAt = time.Now().Add(-w.grace)
	for h := range w.held {
		h.interrupt(StopShutdown)
	}
}

// drain waits for the leads in flight; once stopping, up to the grace, then
// interrupts what runs, and waits for it to be given back.
func (w *Worker) drain() {
	for {
		w.mu.Lock()
		empty, stopping, left := len(w.held) == 0, w.stopping, w.stoppedAt.Add(w.grace).Sub(time.Now())
		if stopping && left <= 0 {
			for h := range w.held {
				h.interrupt(StopShutdown)
			}
		}
		w.mu.Unlock()
		if empty {
			return
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if stopping && left > 0 {
			timer = time.NewTimer(left)
			timeout = timer.C
		}
		select {
		case <-w.idle:
		case <-timeout:
		case <-w.stopChOrNil(stopping):
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// stopChOrNil wakes a drain that is not stopping yet when the worker stops.
func (w *Worker) stopChOrNil(stopping bool) <-chan struct{} {
	if stopping {
		return nil
	}
	return w.stopCh
}

func (w *Worker) logf(format string, args ...any) {
	if w.logger != nil {
		w.logger.Printf(format, args...)
	}
}

const idlePoll = time.Second // an empty lease is not repeated sooner than this

// leaseLoop leases into the free slots until the worker stops (or, with
// WithStopWhenEmpty, until the queue is empty).
func (w *Worker) leaseLoop() {
	var failingSince time.Time
	failures := 0
	for {
		w.mu.Lock()
		if w.stopping {
			w.mu.Unlock()
			return
		}
		free := w.capacity() - len(w.held) - w.reserved
		if free > maxLeaseMax {
			free = maxLeaseMax
		}
		if free > 0 {
			w.reserved += free
		}
		w.mu.Unlock()
		if free <= 0 {
			select {
			case <-w.slotFreed:
			case <-w.stopCh:
			}
			continue
		}
		sent := time.Now()
		leases, err := w.lease(free)
		received := time.Now()
		w.mu.Lock()
		w.unreserve(free)
		for _, lease := range leases {
			w.start(lease, sent, received)
		}
		inFlight := len(w.held)
		w.mu.Unlock()
		if err != nil {
			if !unreachable(err) {
				w.logf("lease refused, stopping: %v", err)
				w.end(err)
				return
			}
			if failingSince.IsZero() {
				failingSince = sent
			}
			delay := w.q.retry.Delay(failures, retryAfterIn(err))
			failures++
			if w.giveUpAfter > 0 && time.Since(failingSince)+delay >= w.giveUpAfter {
				w.end(fmt.Errorf("gave up after %v without reaching the service: %w", time.Since(failingSince).Round(time.Millisecond), err))
				return
			}
			w.logf("lease failed (%v); again in %v", err, delay.Round(time.Millisecond))
			w.pause(delay)
			continue
		}
		failingSince, failures = time.Time{}, 0
		if len(leases) > 0 {
			continue
		}
		// Empty after the whole wait: the queue is empty. Empty sooner: the service
		// cut the wait short (it is shutting down), which says nothing of the queue.
		waited := received.Sub(sent) >= w.wait*9/10
		if waited && inFlight == 0 && w.untilEmpty {
			w.logf("queue empty: stopping")
			return
		}
		w.pause(idlePoll - received.Sub(sent))
	}
}

// pause sleeps d, waking early when the worker stops.
func (w *Worker) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-w.stopCh:
	}
}

// retryAfterIn is the Retry-After an error's answer carried (0: none).
func retryAfterIn(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// lease is one lease call for free slots. When the worker stops while it
// waits, it gets the grace; a lease it brings then is given straight back.
func (w *Worker) lease(free int) ([]*Lease, error) {
	request := LeaseRequest{Session: w.sessions.session, Sessions: w.sessions.sessions, Owner: w.owner, Max: free, TTL: w.ttl, Wait: w.wait}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type answer struct {
		leases []*Lease
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		leases, err := w.q.Lease(ctx, request)
		done <- answer{leases, err}
	}()
	select {
	case a := <-done:
		return a.leases, a.err
	case <-w.stopCh:
	}
	w.mu.Lock()
	left := w.stoppedAt.Add(w.grace).Sub(time.Now())
	w.mu.Unlock()
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case a := <-done:
		return a.leases, a.err
	case <-timer.C:
		cancel()
		a := <-done
		return a.leases, nil
	}
}

// start holds a lease whose request was sent at sent and answered at
// received, and starts its lead's goroutine. Called with mu held.
func (w *Worker) start(lease *Lease, sent, received time.Time) {
	w.stats.Leased++
	ttl := lease.TTL
	if ttl <= 0 {
		ttl = w.ttl
	}
	h := newHeld(lease, sent, received, ttl, w.killGrace)
	h.job = &Job{lease: lease, h: h, w: w}
	if !h.confirmed {
		w.logf("lead %d: its lease came late; confirming it before it runs", lease.Lead.ID)
	}
	if w.stopping {
		h.interrupt(StopShutdown)
	}
	w.held[h] = struct{}{}
	if h.confirmed && h.reason == "" { // in the order leased: the first runs first
		h.queued = true
		w.waiting = append(w.waiting, h)
		w.grant()
	}
	if !w.beatAt.IsZero() && h.renewAt.Before(w.beatAt) { // due before the heartbeat wakes
		signal(w.beatWake)
	}
	go w.hold(h)
}

// unreserve: a lease call that may have filled n slots has answered. Called
// with mu held.
func (w *Worker) unreserve(n int) {
	w.reserved -= n
	if w.reserved == 0 {
		w.unasked.Broadcast()
	}
}

// untilUnasked waits, once the worker is stopping, until no lease call of
// its own is in flight: a lead it gives back is then not taken back by its
// own last long poll (an attempt spent for nothing, and a lease its
// cancelled poll would leave to no one). Called with mu held.
func (w *Worker) untilUnasked() {
	for w.stopping && w.reserved > 0 {
		w.unasked.Wait()
	}
}

// forget: h is no longer held; its slot is free. Called with mu held.
func (w *Worker) forget(h *held) {
	if h.gone {
		return
	}
	h.gone = true
	w.unqueue(h)
	delete(w.held, h)
	signal(w.slotFreed)
	if len(w.held) == 0 {
		signal(w.idle)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
