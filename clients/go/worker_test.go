package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The Worker's promise, against a real service (through a misbehaving proxy
// where a test needs one).

// hooked calls before with each request (and its body) before sending it.
type hooked struct {
	base   http.RoundTripper
	before func(r *http.Request, body []byte)
}

func (h *hooked) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	h.before(r, body)
	return h.base.RoundTrip(r)
}

func withHook(before func(r *http.Request, body []byte)) Option {
	return WithHTTPClient(&http.Client{Transport: &hooked{base: defaultHTTPClient().Transport, before: before}})
}

// running runs w until the returned stop is called; stop waits for Run and returns its error.
func running(t *testing.T, w *Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the worker did not stop within a minute")
			}
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// receive is the next value of ch; the test fails if none comes within a minute.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("nothing came within a minute")
	}
	panic("unreachable")
}

func quiet() WorkerOption { return WithLogger(log.New(io.Discard, "", 0)) }

func TestAWorkerDrainsASessionOnceEach(t *testing.T) {
	q, session := newQueue(t, ""), newSession(t)
	const n = 200
	pushN(t, q, session, n, nil)
	var mu sync.Mutex
	seen := map[int64]int{}
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		mu.Lock()
		seen[job.ID()]++
		mu.Unlock()
		return map[string]any{"lead": job.ID()}, nil
	}, WithConcurrency(4), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d leads handled, want %d", len(seen), n)
	}
	for id, times := range seen {
		if times != 1 {
			t.Fatalf("lead %d handled %d times", id, times)
		}
	}
	checkDrainedOnce(t, q, session, n)
	if stats := w.Stats(); stats.Done != n || stats.Leased != n || stats.Lost != 0 {
		t.Fatalf("worker stats: %+v", stats)
	}
}

func TestHandlersThatFinishTogetherAreCompletedInOneBatch(t *testing.T) {
	session := newSession(t)
	const n = 8
	var w *Worker
	var requests, items int32
	q := newQueue(t, "", withHook(func(r *http.Request, body []byte) {
		if r.URL.Path != "/complete/batch" {
			return
		}
		var batch struct {
			Items []json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(body, &batch)
		if atomic.AddInt32(&requests, 1) == 1 {
			// The first completion is on its way: the others finish meanwhile, and wait.
			until(t, 30*time.Second, "the other completions to be queued", func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return len(w.completing.pending) == n-len(batch.Items)
			})
		}
		atomic.AddInt32(&items, int32(len(batch.Items)))
	}))
	pushN(t, q, session, n, nil)
	started := make(chan struct{}, n)
	all := make(chan struct{})
	var err error
	w, err = NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-all
		return "ok", nil
	}, WithConcurrency(n), WithPrefetch(0), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < n; i++ {
			<-started
		}
		close(all)
	}()
	if err := w.Run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if requests != 2 || items != n {
		t.Fatalf("%d completions in %d requests, want %d in 2", items, requests, n)
	}
	checkDrainedOnce(t, q, session, n)
}

func TestTheNextLeadIsThereAndRunsWhileTheLastOnesCompletionIsOnItsWay(t *testing.T) {
	session := newSession(t)
	var mu sync.Mutex
	var order []int64
	startedSecond := make(chan struct{})
	var once sync.Once
	q := newQueue(t, "", withHook(func(r *http.Request, body []byte) {
		if r.URL.Path == "/complete/batch" {
			// No completion is answered before the second lead runs: a worker that
			// waited for its answer to start the next lead would never get there.
			<-startedSecond
		}
	}))
	leads := pushN(t, q, session, 3, nil)
	release := make(chan struct{})
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		mu.Lock()
		order = append(order, job.ID())
		first := len(order) == 1
		mu.Unlock()
		if first {
			<-release
		} else {
			once.Do(func() { close(startedSecond) })
		}
		return nil, nil
	}, WithConcurrency(1), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w)
	until(t, 30*time.Second, "two leads held while one runs", func() bool {
		stats, err := q.Stats(testContext(t), session)
		return err == nil && stats.Leased == 2 && stats.Queued == 1
	})
	close(release)
	until(t, 60*time.Second, "the session drained", func() bool {
		stats, err := q.Stats(testContext(t), session)
		return err == nil && stats.Done == 3
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 || order[0] != leads[0].ID || order[1] != leads[1].ID {
		t.Fatalf("ran %v", order)
	}
	checkDrainedOnce(t, q, session, 3)
}

func TestALostLeaseCancelsExactlyItsHandler(t *testing.T) {
	q, session, ctx := newQueue(t, "", WithTTL(3*time.Second)), newSession(t), testContext(t)
	leads := pushN(t, q, session, 2, nil)
	reasons := make(chan [2]any, 2)
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		<-ctx.Done()
		reasons <- [2]any{job.ID(), job.StopReason()}
		return nil, ctx.Err()
	}, WithConcurrency(2), WithPrefetch(0), WithGrace(0), quiet())
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w)
	until(t, 30*time.Second, "both leads running", func() bool {
		stats, err := q.Stats(ctx, session)
		return err == nil && stats.Leased == 2
	})
	if _, err := q.CancelLead(ctx, leads[0].ID); err != nil {
		t.Fatal(err)
	}
	got := receive(t, reasons) // its next renewal (a second on) finds the lease lost
	if got[0] != leads[0].ID || got[1] != StopLost {
		t.Fatalf("stopped %v, want lead %d for %q", got, leads[0].ID, StopLost)
	}
	select {
	case other := <-reasons:
		t.Fatalf("another handler was stopped: %v", other)
	default:
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, reasons); got[0] != leads[1].ID || got[1] != StopShutdown {
		t.Fatalf("at the shutdown: %v", got)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil || stats.Failed != 1 || stats.Queued != 1 {
		t.Fatalf("the cancelled lead failed, the other given back: %+v %v", stats, err)
	}
	if ws := w.Stats(); ws.Lost != 1 || ws.Released != 1 {
		t.Fatalf("worker stats: %+v", ws)
	}
}

func TestAStalledHeartbeatStopsTheHandlerWhileItsLeaseIsStillValid(t *testing.T) {
	direct := newQueue(t, "")
	proxy := newFaultyProxy(t, direct.URL())
	q, session, ctx := newQueue(t, proxy.URL, WithTTL(4*time.Second)), newSession(t), testContext(t)
	proxy.setRule(func(r *http.Request) action {
		if strings.HasPrefix(r.URL.Path, "/renew") {
			return hang // no renewal is ever answered
		}
		return forward
	})
	leads := pushN(t, q, session, 1, nil)
	type stopped struct {
		reason    StopReason
		at        time.Time
		expiresAt time.Time // the lease's end, on the database's clock (this machine's too)
	}
	stops := make(chan stopped, 1)
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		<-ctx.Done()
		stops <- stopped{job.StopReason(), time.Now(), job.lease.ExpiresAt}
		return nil, ctx.Err()
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w)
	got := receive(t, stops)
	if got.reason != StopExpired || !got.at.Before(got.expiresAt) {
		t.Fatalf("stopped for %q at %v, the lease ending at %v", got.reason, got.at, got.expiresAt)
	}
	lead, err := direct.GetLead(ctx, leads[0].ID)
	if err != nil || lead.Status != Leased || !lead.LeaseExpiresAt.Equal(got.expiresAt) {
		t.Fatalf("the lead, leased still and never renewed: %+v %v", lead, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ws := w.Stats(); ws.Lost != 1 || ws.Released != 0 {
		t.Fatalf("nothing is sent for a lease that may be gone: %+v", ws)
	}
}

func TestACompletionWhoseAnswerIsLostIsRetriedUnderItsKeyAndStrandsNothing(t *testing.T) {
	direct := newQueue(t, "")
	proxy := newFaultyProxy(t, direct.URL())
	q, session := newQueue(t, proxy.URL), newSession(t)
	var dropped int32
	proxy.setRule(func(r *http.Request) action {
		if r.URL.Path == "/complete/batch" && atomic.AddInt32(&dropped, 1) == 1 {
			return dropAnswer
		}
		return forward
	})
	const n = 20
	pushN(t, q, session, n, nil)
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		return job.ID(), nil
	}, WithConcurrency(2), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if dropped < 2 {
		t.Fatalf("the proxy dropped no answer: %d completions", dropped)
	}
	checkDrainedOnce(t, q, session, n)
	report, err := q.Report(testContext(t), session)
	if err != nil || report.Expired != 0 || report.Leases != n {
		t.Fatalf("a lease stranded or taken twice: %+v %v", report, err)
	}
}

func TestAnOutageOf503IsRiddenOutAtABoundedRate(t *testing.T) {
	direct := newQueue(t, "")
	proxy := newFaultyProxy(t, direct.URL())
	q, session := newQueue(t, proxy.URL), newSession(t)
	const n, outage = 20, 3 * time.Second
	pushN(t, direct, session, n, nil)
	began := time.Now()
	proxy.setRule(func(r *http.Request) action {
		if time.Since(began) < outage {
			return unavailable
		}
		return forward
	})
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		return nil, nil
	}, WithConcurrency(4), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if time.Since(began) < outage {
		t.Fatal("drained during the outage")
	}
	during := proxy.requestsBetween(began, began.Add(outage))
	t.Logf("%d requests in the %v of 503s", during, outage)
	if during < 2 || during > 8 {
		t.Fatalf("%d requests in the %v of 503s, want at most a few a second", during, outage)
	}
	checkDrainedOnce(t, direct, session, n)
}

func TestAtAShutdownEveryLeadHeldIsGivenBack(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	pushN(t, q, session, 5, nil)
	var mu sync.Mutex
	reasons := []StopReason{}
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		<-ctx.Done()
		mu.Lock()
		reasons = append(reasons, job.StopReason())
		mu.Unlock()
		return nil, ctx.Err()
	}, WithConcurrency(2), WithPrefetch(1), WithGrace(100*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w)
	until(t, 30*time.Second, "three leads held", func() bool {
		stats, err := q.Stats(ctx, session)
		return err == nil && stats.Leased == 3
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil || stats.Queued != 5 || stats.Leased != 0 {
		t.Fatalf("given back at once, not at their ttl: %+v %v", stats, err)
	}
	if len(reasons) != 2 || reasons[0] != StopShutdown || reasons[1] != StopShutdown {
		t.Fatalf("the running handlers were told %v", reasons)
	}
	if ws := w.Stats(); ws.Released != 3 {
		t.Fatalf("worker stats: %+v", ws)
	}
}

func TestAHandlersErrorIsRetriedThenFailsTheLeadOnItsLastAttempt(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := []Lead{{SessionID: session, MaxAttempts: 2}}
	if err := q.Push(ctx, leads); err != nil {
		t.Fatal(err)
	}
	var attempts []int
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		attempts = append(attempts, job.Attempt())
		return nil, fmt.Errorf("upstream said no to attempt %d", job.Attempt())
	}, WithRetryDelay(func(int) time.Duration { return 0 }), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	lead, err := q.GetLead(ctx, leads[0].ID)
	if err != nil || lead.Status != Failed || lead.Error != "upstream said no to attempt 2" || len(attempts) != 2 {
		t.Fatalf("lead: %+v %v; attempts %v", lead, err, attempts)
	}
	if ws := w.Stats(); ws.Errors != 2 || ws.Released != 1 || ws.Failed != 1 {
		t.Fatalf("worker stats: %+v", ws)
	}
}

func TestAMaximumRuntimeCancelsTheHandlerAndFailsTheAttempt(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := []Lead{{SessionID: session, MaxAttempts: 1}}
	if err := q.Push(ctx, leads); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		<-ctx.Done()
		if job.StopReason() != StopMaxRuntime {
			t.Errorf("stopped for %q", job.StopReason())
		}
		return nil, ctx.Err()
	}, WithMaxRuntime(200*time.Millisecond), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	lead, err := q.GetLead(ctx, leads[0].ID)
	if err != nil || lead.Status != Failed || lead.Error != "max runtime exceeded (200ms)" {
		t.Fatalf("lead: %+v %v", lead, err)
	}
}

func TestACachedResultAndAThrottle(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := pushN(t, q, session, 2, func(i int) string { return fmt.Sprintf(`{"throttle":%v}`, i == 1) })
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		var payload struct{ Throttle bool }
		_ = json.Unmarshal(job.Payload(), &payload)
		if payload.Throttle {
			return nil, Throttle(time.Minute)
		}
		return CachedResult{Value: "from elsewhere"}, nil
	}, WithPrefetch(0), WithStopWhenEmpty(), WithWait(300*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cached, err := q.GetLead(ctx, leads[0].ID)
	if err != nil || cached.Status != Cached || string(cached.Result) != `"from elsewhere"` {
		t.Fatalf("cached: %+v %v", cached, err)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil || stats.Queued != 1 || stats.PausedUntil.IsZero() {
		t.Fatalf("the throttled lead given back, its session paused: %+v %v", stats, err)
	}
}

func TestAHandlerThatCanRunNothingEndsTheRunAndGivesItsLeadBack(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := pushN(t, q, session, 1, nil)
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		return nil, fmt.Errorf("%w: no program to run", ErrHandlerUnusable)
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); !errors.Is(err, ErrHandlerUnusable) {
		t.Fatalf("the run ended with %v", err)
	}
	lead, err := q.GetLead(ctx, leads[0].ID)
	if err != nil || lead.Status != Queued || lead.Attempts != 1 {
		t.Fatalf("lead: %+v %v", lead, err)
	}
}

func TestACheckpointGoesWithTheLeadWhenItIsGivenBack(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := pushN(t, q, session, 1, nil)
	set := make(chan struct{})
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		if err := job.Checkpoint(map[string]int{"page": 3}); err != nil {
			t.Error(err)
		}
		if err := job.Checkpoint(nil); !errors.Is(err, ErrValidation) {
			t.Errorf("a null checkpoint: %v", err)
		}
		close(set)
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithGrace(0), quiet())
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w)
	receive(t, set)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	lead, err := q.GetLead(ctx, leads[0].ID)
	if err != nil || lead.Status != Queued || string(lead.Checkpoint) != `{"page":3}` {
		t.Fatalf("lead: %+v %v", lead, err)
	}
}

func TestAPrefetchedLeadGivenBackAtAShutdownSpendsNoAttempt(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := []Lead{{SessionID: session, MaxAttempts: 1}, {SessionID: session, MaxAttempts: 1}}
	if err := q.Push(ctx, leads); err != nil {
		t.Fatal(err)
	}
	started := make(chan int64, 2)
	w, err := NewWorker(q, session, func(ctx context.Context, job *Job) (any, error) {
		started <- job.ID()
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithConcurrency(1), WithPrefetch(1), WithGrace(100*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, w)
	ran := receive(t, started)
	until(t, 30*time.Second, "the second lead prefetched", func() bool {
		stats, err := q.Stats(ctx, session)
		return err == nil && stats.Leased == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(started) != 0 {
		t.Fatalf("the prefetched lead was started too")
	}
	for _, pushed := range leads {
		lead, err := q.GetLead(ctx, pushed.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case pushed.ID == ran && lead.Status != Failed:
			t.Fatalf("the lead that ran used its one attempt: %+v", lead)
		case pushed.ID != ran && (lead.Status != Queued || lead.Attempts != 1 || lead.Error != ""):
			t.Fatalf("the prefetched lead is queued, its lease spending no attempt: %+v", lead)
		}
	}
	again, err := q.LeaseNext(ctx, session, "another")
	if err != nil || again == nil || again.Lead.Status != Leased {
		t.Fatalf("the prefetched lead is leased again: %+v %v", again, err)
	}
}
