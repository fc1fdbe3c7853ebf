package leaseq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// What the integration tests share: the service under test (LEASEQ_TEST_URL;
// without it they skip), a fresh session each, polls whose deadline is their
// only failure, and a proxy that misbehaves on purpose.

const testURLEnv = "LEASEQ_TEST_URL"

// serviceURL is the leaseq service the integration tests talk to; the test
// skips without one.
func serviceURL(t *testing.T) string {
	t.Helper()
	base := os.Getenv(testURLEnv)
	if base == "" {
		t.Skipf("no service: set %s to a leaseq serve's URL (tests/clients/test_go.py starts one)", testURLEnv)
	}
	return base
}

// newQueue is a client of the service under test (or of base, when given).
func newQueue(t *testing.T, base string, opts ...Option) *Queue {
	t.Helper()
	if base == "" {
		base = serviceURL(t)
	}
	q, err := New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// newSession is a session of this test alone.
func newSession(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return name + "-" + hex.EncodeToString(b[:])
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// until polls condition until it holds; the deadline is its only failure.
func until(t *testing.T, timeout time.Duration, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pushN pushes n leads with the payload of each (nil: {}), and returns them with their ids.
func pushN(t *testing.T, q *Queue, session string, n int, payload func(i int) string) []Lead {
	t.Helper()
	leads := make([]Lead, n)
	for i := range leads {
		leads[i] = Lead{SessionID: session}
		if payload != nil {
			leads[i].Payload = []byte(payload(i))
		}
	}
	if err := q.Push(testContext(t), leads); err != nil {
		t.Fatal(err)
	}
	return leads
}

// checkDrainedOnce fails unless every one of the session's n leads is done,
// each completed once and never leased twice at once (the ledger's audit).
func checkDrainedOnce(t *testing.T, q *Queue, session string, n int) {
	t.Helper()
	ctx := testContext(t)
	stats, err := q.Stats(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Done != n || stats.Pending() != 0 || stats.Failed != 0 {
		t.Fatalf("stats: %+v, want %d done", stats, n)
	}
	report, err := q.Report(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if report.Completed != n || report.Completions != n || report.DoubleCompletions != 0 || report.OverlappingLeases != 0 {
		t.Fatalf("report: %+v, want %d leads completed once each", report, n)
	}
}

// faultyProxy forwards to the service, but each request first meets rule,
// which may answer it itself (a 503, a hang) or have its answer dropped.
type faultyProxy struct {
	*httptest.Server
	mu      sync.Mutex
	rule    func(r *http.Request) action
	seen    map[string]int // requests by path
	times   []time.Time    // when each request came
	closing chan struct{}  // closed when the test ends: what hangs returns
}

type action int

const (
	forward     action = iota
	unavailable        // 503 unavailable, Retry-After: 1
	hang               // never answered (until the client gives up)
	dropAnswer         // forwarded, but the connection is closed instead of answering
)

func newFaultyProxy(t *testing.T, target string) *faultyProxy {
	t.Helper()
	upstream, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	reverse := httputil.NewSingleHostReverseProxy(upstream)
	p := &faultyProxy{seen: map[string]int{}, closing: make(chan struct{})}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen[r.URL.Path]++
		p.times = append(p.times, time.Now())
		rule := p.rule
		p.mu.Unlock()
		what := forward
		if rule != nil {
			what = rule(r)
		}
		switch what {
		case unavailable:
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"type":"urn:leaseq:problem:unavailable","title":"Service unavailable","status":503,"detail":"the proxy is down","code":"unavailable"}`)
		case hang:
			_, _ = io.Copy(io.Discard, r.Body) // the connection's end is seen once the body is read
			select {
			case <-r.Context().Done():
			case <-p.closing:
			}
		case dropAnswer:
			recorder := httptest.NewRecorder()
			reverse.ServeHTTP(recorder, r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			reverse.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() {
		close(p.closing)
		p.Close()
	})
	return p
}

func (p *faultyProxy) setRule(rule func(r *http.Request) action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = rule
}

func (p *faultyProxy) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[path]
}

// requestsBetween counts the requests that came in [from, to).
func (p *faultyProxy) requestsBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}
