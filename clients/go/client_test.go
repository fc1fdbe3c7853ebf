package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The client's side of the wire, against a local HTTP server that answers
// what each test needs: options, retries, errors, packing.

func TestNewRefusesWhatIsNotAServiceURLAndOptionsOutOfRange(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:8000", "ftp://host", "http://", "http://host/?q=1", "http://host/#f", "http://host:x"} {
		if _, err := New(bad); !errors.Is(err, ErrValidation) {
			t.Errorf("New(%q): %v", bad, err)
		}
	}
	for _, opt := range []Option{WithTTL(500 * time.Millisecond), WithTTL(2 * time.Hour), WithToken(""), WithToken("a\nb"), WithTimeout(0), WithHTTPClient(nil), WithRetryPolicy(RetryPolicy{})} {
		if _, err := New("http://127.0.0.1:1", opt); !errors.Is(err, ErrValidation) {
			t.Errorf("an option out of range: %v", err)
		}
	}
	q, err := New("http://127.0.0.1:8000/", WithTTL(0))
	if err != nil || q.URL() != "http://127.0.0.1:8000" || q.TTL() != DefaultLeaseTTL {
		t.Fatalf("%v %v", q, err)
	}
}

func TestARetryWaitsAtLeastTheAnswersRetryAfterAndHalfToAllOfItsBackoff(t *testing.T) {
	p := DefaultRetryPolicy
	for retry := 0; retry < 8; retry++ {
		limit := p.Base << retry
		if limit > p.Max {
			limit = p.Max
		}
		for i := 0; i < 50; i++ {
			if d := p.Delay(retry, 0); d < limit/2 || d > limit {
				t.Fatalf("retry %d: %v outside [%v, %v]", retry, d, limit/2, limit)
			}
			if d := p.Delay(retry, time.Second); d < time.Second || d > 2*time.Second {
				t.Fatalf("retry %d with Retry-After 1s: %v", retry, d)
			}
		}
	}
	if d := p.Delay(0, time.Hour); d < maxRetryAfter || d > maxRetryAfter*5/4 {
		t.Fatalf("a Retry-After of an hour: %v", d)
	}
}

// answering is a local server that answers each request with what answer says.
func answering(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		answer(w, r, body)
	}))
	t.Cleanup(server.Close)
	return server
}

func fast() Option {
	return WithRetryPolicy(RetryPolicy{Attempts: 4, Base: time.Millisecond, Max: 4 * time.Millisecond})
}

func TestAPushRetriedAfter503sRepeatsItsIdempotencyKeyAndItsBody(t *testing.T) {
	var mu sync.Mutex
	var keys, bodies []string
	server := answering(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodies = append(bodies, string(body))
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer t0k" {
			t.Errorf("headers: %v", r.Header)
		}
		if len(keys) < 3 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
		fmt.Fprint(w, `{"ids":[7],"created":1,"duplicates":0}`)
	})
	q := newQueue(t, server.URL, fast(), WithToken("t0k"))
	leads := []Lead{{SessionID: "s", Payload: json.RawMessage(`{"a":1}`), Delay: 1500 * time.Millisecond}}
	if err := q.Push(context.Background(), leads); err != nil {
		t.Fatal(err)
	}
	if leads[0].ID != 7 || len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("id %d, keys %v", leads[0].ID, keys)
	}
	if bodies[0] != `{"leads":[{"payload":{"a":1},"delay_s":1.5}]}` || bodies[2] != bodies[0] {
		t.Fatalf("bodies %v", bodies)
	}
}

func TestAProblemAnswerIsATypedErrorAndA4xxIsNeverRetried(t *testing.T) {
	calls := 0
	server := answering(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		calls++
		w.Header().Set("Content-Type", "application/problem+json")
		switch r.URL.Path {
		case "/complete":
			w.WriteHeader(409)
			fmt.Fprint(w, `{"type":"urn:leaseq:problem:lease_lost","title":"Lease lost","status":409,"detail":"gone","code":"lease_lost","reason":"max_runtime"}`)
		case "/sessions/s/leads":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
			fmt.Fprint(w, `{"title":"Quota exceeded","status":429,"detail":"max_queued 2","code":"quota_exceeded"}`)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(502)
			fmt.Fprint(w, "bad gateway")
		}
	})
	q, ctx := newQueue(t, server.URL, fast()), context.Background()
	lease := &Lease{Lead: &Lead{ID: 1}, Token: "t"}
	_, err := q.CompleteWith(ctx, lease, Completion{})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrLeaseLost) || e.Status != 409 || e.Reason != "max_runtime" || e.Detail != "gone" || calls != 1 {
		t.Fatalf("lease lost: %#v after %d calls", err, calls)
	}
	if err := q.Complete(ctx, lease, Done); err != ErrLeaseLost {
		t.Fatalf("the queue API's Complete: %v", err)
	}
	err = q.Push(ctx, []Lead{{SessionID: "s"}})
	if !errors.As(err, &e) || !errors.Is(err, ErrQuotaExceeded) || e.RetryAfter != 7*time.Second {
		t.Fatalf("quota: %#v", err)
	}
	calls = 0
	_, err = q.Stats(ctx, "s")
	if !errors.As(err, &e) || !errors.Is(err, ErrUnavailable) || e.Status != 502 || e.Detail != "bad gateway" || calls != 4 {
		t.Fatalf("a 502, retried: %#v after %d calls", err, calls)
	}
}

func TestAServiceOutOfReachIsUnavailableAfterTheRetries(t *testing.T) {
	server := answering(t, func(w http.ResponseWriter, r *http.Request, body []byte) {})
	base := server.URL
	server.Close()
	q := newQueue(t, base, fast())
	_, err := q.Stats(context.Background(), "s")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrUnavailable) || e.Status != 0 || e.Err == nil || !strings.Contains(e.Detail, base) {
		t.Fatalf("%#v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Stats(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose ctx ended: %v", err)
	}
}

func TestAPushIsSplitIntoCallsOfOneSessionAtMost1000LeadsAnd1MiB(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	server := answering(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if len(body) > maxBodyBytes {
			t.Errorf("a body of %d bytes", len(body))
		}
		var push struct{ Leads []json.RawMessage }
		_ = json.Unmarshal(body, &push)
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s:%d", r.URL.Path, len(push.Leads)))
		mu.Unlock()
		ids := make([]string, len(push.Leads))
		for i := range ids {
			ids[i] = "1"
		}
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"ids":[%s],"created":%d,"duplicates":0}`, strings.Join(ids, ","), len(ids))
	})
	q := newQueue(t, server.URL)
	var leads []Lead
	for i := 0; i < 2500; i++ {
		leads = append(leads, Lead{SessionID: "a"})
	}
	big := json.RawMessage(`{"x":"` + strings.Repeat("y", 400*1024) + `"}`)
	for i := 0; i < 3; i++ {
		leads = append(leads, Lead{SessionID: "b", Payload: big})
	}
	leads = append(leads, Lead{SessionID: "a"})
	result, err := q.PushIDs(context.Background(), leads)
	if err != nil || len(result.IDs) != len(leads) || result.Created != len(leads) {
		t.Fatalf("%+v %v", result.Created, err)
	}
	want := []string{"/sessions/a/leads:1000", "/sessions/a/leads:1000", "/sessions/a/leads:500", "/sessions/b/leads:2", "/sessions/b/leads:1", "/sessions/a/leads:1"}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

func TestNamesThatWouldLeaveTheirPathAreRefusedBeforeAnythingIsSent(t *testing.T) {
	q := newQueue(t, "http://127.0.0.1:1")
	ctx := context.Background()
	for _, session := range []string{"a/b", "..", "-a", strings.Repeat("s", 129), "a b"} {
		if _, err := q.Stats(ctx, session); !errors.Is(err, ErrValidation) {
			t.Errorf("stats of %q: %v", session, err)
		}
		if _, err := q.GetSettings(ctx, session); !errors.Is(err, ErrValidation) {
			t.Errorf("settings of %q: %v", session, err)
		}
	}
	if _, err := q.GetLead(ctx, 0); !errors.Is(err, ErrValidation) {
		t.Errorf("lead 0: %v", err)
	}
	if _, err := q.CompleteWith(ctx, &Lease{Lead: &Lead{ID: 1}}, Completion{Status: Queued}); !errors.Is(err, ErrValidation) {
		t.Errorf("a completion as queued: %v", err)
	}
	if _, err := q.CompleteWith(ctx, &Lease{Lead: &Lead{ID: 1}}, Completion{Result: func() {}}); !errors.Is(err, ErrValidation) {
		t.Errorf("a result that is not JSON: %v", err)
	}
	if _, err := NewWorker(q, "a/b", func(context.Context, *Job) (any, error) { return nil, nil }); !errors.Is(err, ErrValidation) {
		t.Errorf("a worker of a bad session: %v", err)
	}
}

func TestAKeyedPushCarriesItsKeyAndPushedAsksForItByTheKey(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	server := answering(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Idempotency-Key"))
		switch {
		case r.Method == "POST":
			w.WriteHeader(201)
			fmt.Fprint(w, `{"ids":[7],"created":1,"duplicates":0}`)
		case strings.HasSuffix(r.URL.EscapedPath(), "/order%2F7"):
			fmt.Fprint(w, `{"ids":[7],"created":1,"duplicates":0}`)
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			fmt.Fprint(w, `{"status":404,"code":"not_found","title":"Not found","detail":"no push"}`)
		}
	})
	q := newQueue(t, server.URL, fast())
	ctx := context.Background()
	if _, err := q.PushKeyed(ctx, "order/7", []Lead{{SessionID: "s", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	stored, err := q.Pushed(ctx, "s", "order/7")
	if err != nil || stored == nil || len(stored.IDs) != 1 || stored.IDs[0] != 7 || stored.Created != 1 {
		t.Fatalf("stored %+v, err %v", stored, err)
	}
	none, err := q.Pushed(ctx, "s", "never")
	if err != nil || none != nil {
		t.Fatalf("none %+v, err %v", none, err)
	}
	want := []string{"POST /sessions/s/leads order/7", "GET /sessions/s/pushes/order%2F7 ", "GET /sessions/s/pushes/never "}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("seen %q", seen)
	}
}

func TestAWorkerGivenNoTTLAsksForItsOwnShortLeaseNotTheQueuesFiveMinutes(t *testing.T) {
	var mu sync.Mutex
	var asked []float64
	server := answering(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var lease struct {
			TTLS float64 `json:"ttl_s"`
		}
		_ = json.Unmarshal(body, &lease)
		mu.Lock()
		asked = append(asked, lease.TTLS)
		mu.Unlock()
		fmt.Fprint(w, `{"leases":[]}`)
	})
	handler := func(context.Context, *Job) (any, error) { return nil, nil }
	for _, c := range []struct {
		opts  []Option
		wopts []WorkerOption
		want  float64
	}{
		{nil, nil, 30}, // DefaultWorkerTTL: killed, it strands a lead 30 s
		{[]Option{WithTTL(7 * time.Second)}, nil, 7},               // the queue's own, when given
		{nil, []WorkerOption{WithKillGrace(20 * time.Second)}, 42}, // long enough for the grace
	} {
		asked = nil
		q := newQueue(t, server.URL, append(c.opts, fast())...)
		w, err := NewWorker(q, "s", handler, append(c.wopts, WithWait(0), WithStopWhenEmpty(), quiet())...)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(asked) == 0 || asked[0] != c.want {
			t.Errorf("asked %v, want a ttl of %v s", asked, c.want)
		}
		mu.Unlock()
	}
}
