package leaseq

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultLeaseTTL is how long a worker may hold a lead without a heartbeat,
// unless WithTTL says otherwise.
const DefaultLeaseTTL = 5 * time.Minute

// DefaultTimeout bounds each request the client sends (a long poll gets its
// wait on top).
const DefaultTimeout = 10 * time.Second

// The lease ttl the service takes: 1 s to 1 h.
const (
	minTTL = time.Second
	maxTTL = time.Hour
)

// Queue is a client of a leaseq service: the API of the queue package leaseq
// grew from (Push, LeaseNext, Renew, Complete, Release, Sweep, Stats, TTL),
// and the service's own calls beside it. It is safe for concurrent use.
type Queue struct {
	base    string // the service's URL, without a trailing slash
	token   string
	client  *http.Client
	ttl     time.Duration
	timeout time.Duration
	retry   RetryPolicy
}

// Option configures a Queue.
type Option func(*Queue) error

// WithToken sends `Authorization: Bearer token` with every request.
func WithToken(token string) Option {
	return func(q *Queue) error {
		if token == "" || strings.ContainsAny(token, "\r\n") {
			return invalid("a token must be one line, not empty")
		}
		q.token = token
		return nil
	}
}

// WithTTL sets the lease time the queue asks for (TTL); 0 keeps DefaultLeaseTTL.
// The service takes 1 s to 1 h.
func WithTTL(ttl time.Duration) Option {
	return func(q *Queue) error {
		if ttl == 0 {
			return nil
		}
		if ttl < minTTL || ttl > maxTTL {
			return invalid("a lease ttl must be from 1s to 1h, not %v", ttl)
		}
		q.ttl = ttl
		return nil
	}
}

// WithHTTPClient sends the requests through client (its Transport; its
// Timeout, if any, bounds a long poll too). The default keeps up to 128
// connections to the service open for reuse.
func WithHTTPClient(client *http.Client) Option {
	return func(q *Queue) error {
		if client == nil {
			return invalid("the HTTP client is nil")
		}
		q.client = client
		return nil
	}
}

// WithTimeout bounds each request (DefaultTimeout); a long poll gets its wait
// on top.
func WithTimeout(timeout time.Duration) Option {
	return func(q *Queue) error {
		if timeout <= 0 {
			return invalid("a timeout must be positive, not %v", timeout)
		}
		q.timeout = timeout
		return nil
	}
}

// WithRetryPolicy sets how a call is retried on a connection error, a
// timeout, or a 502, 503 or 504 answer (DefaultRetryPolicy).
func WithRetryPolicy(policy RetryPolicy) Option {
	return func(q *Queue) error {
		if policy.Attempts < 1 || policy.Base < 0 || policy.Max < policy.Base {
			return invalid("a retry policy needs at least one attempt, and 0 <= Base <= Max")
		}
		q.retry = policy
		return nil
	}
}

// New makes a client of the leaseq service at baseURL (http or https).
// Nothing is sent until a call is made.
func New(baseURL string, opts ...Option) (*Queue, error) {
	parsed, err := url.Parse(baseURL)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, invalid("the service's URL must be http(s)://host[:port][/path], not %q", baseURL)
	}
	if parsed.RawQuery != "" || parsed.Fragment != "" {
		return nil, invalid("the service's URL must have no query or fragment: %q", baseURL)
	}
	q := &Queue{
		base:    strings.TrimRight(baseURL, "/"),
		client:  defaultHTTPClient(),
		ttl:     DefaultLeaseTTL,
		timeout: DefaultTimeout,
		retry:   DefaultRetryPolicy,
	}
	for _, opt := range opts {
		if err := opt(q); err != nil {
			return nil, err
		}
	}
	return q, nil
}

var (
	sharedTransport     *http.Transport
	sharedTransportOnce sync.Once
)

// defaultHTTPClient is one transport for every Queue of the process, keeping
// enough idle connections for a worker's slots, its heartbeat and its
// completions (net/http keeps 2 per host by default).
func defaultHTTPClient() *http.Client {
	sharedTransportOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 128
		t.MaxIdleConnsPerHost = 128
		t.IdleConnTimeout = 60 * time.Second
		sharedTransport = t
	})
	return &http.Client{Transport: sharedTransport}
}

// URL is the service's URL, as given to New (without a trailing slash).
func (q *Queue) URL() string { return q.base }

// TTL is the lease duration in force, so a caller can size a heartbeat from
// it: what LeaseNext asks for, and what Renew asks again.
func (q *Queue) TTL() time.Duration { return q.ttl }

// RetryPolicy says how often and how patiently a call is retried after a
// connection error, a timeout or a 502, 503 or 504 answer. A 4xx answer
// never is. Retry n waits a random time between half and all of
// min(Max, Base·2ⁿ), and never less than the answer's Retry-After (held to
// at most a minute).
type RetryPolicy struct {
	Attempts int           // tries in all, the first included
	Base     time.Duration // the first retry's wait, before jitter
	Max      time.Duration // the longest wait, before Retry-After
}

// DefaultRetryPolicy: 6 tries, waiting 0.1 s doubling up to 2 s.
var DefaultRetryPolicy = RetryPolicy{Attempts: 6, Base: 100 * time.Millisecond, Max: 2 * time.Second}

// noRetry sends a call once: the heartbeat retries on its own schedule.
var noRetry = RetryPolicy{Attempts: 1}

const maxRetryAfter = time.Minute

var (
	jitterMu sync.Mutex
	jitter   = mathrand.New(mathrand.NewSource(time.Now().UnixNano()))
)

// random is a uniform time in [0, d).
func random(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	jitterMu.Lock()
	defer jitterMu.Unlock()
	return time.Duration(jitter.Int63n(int64(d)))
}

// Delay is the wait before retry n (0 for the first retry), given the
// answer's Retry-After (0 when none).
func (p RetryPolicy) Delay(retry int, retryAfter time.Duration) time.Duration {
	limit := p.Max
	if retry < 30 && p.Base<<retry < limit {
		limit = p.Base << retry
	}
	wait := limit/2 + random(limit/2)
	if retryAfter > maxRetryAfter {
		retryAfter = maxRetryAfter
	}
	if retryAfter > wait {
		wait = retryAfter + random(retryAfter/4) // a fleet told the same does not come back at once
	}
	return wait
}

// newKey is an Idempotency-Key for one logical call, sent again with each of
// its retries: 128 random bits.
func newKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("leaseq: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// call is one request of an endpoint.
type call struct {
	method  string
	path    string        // escaped already
	query   url.Values    // nil: none
	body    any           // marshaled as JSON; nil: no body
	raw     []byte        // a body marshaled already (instead of body)
	key     string        // the Idempotency-Key, sent with every try
	timeout time.Duration // of each try; 0: the queue's
	policy  *RetryPolicy  // nil: the queue's
}

// do sends c, retried by its policy, and reads a success's JSON into out (nil:
// the answer's body is dropped). It returns an *Error for an error answer or
// an unreachable service, and ctx's error once ctx ends.
func (q *Queue) do(ctx context.Context, c call, out any) error {
	body := c.raw
	if body == nil && c.body != nil {
		var err error
		if body, err = json.Marshal(c.body); err != nil {
			return invalid("the request is not JSON: %v", err)
		}
	}
	target := q.base + c.path
	if len(c.query) > 0 {
		target += "?" + c.query.Encode()
	}
	policy := q.retry
	if c.policy != nil {
		policy = *c.policy
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = q.timeout
	}
	for retry := 0; ; retry++ {
		last := retry+1 >= policy.Attempts
		status, answer, header, err := q.send(ctx, c, target, body, timeout)
		var retryAfter time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if last {
				return &Error{
					Code:   "unavailable",
					Title:  "Service unavailable",
					Detail: fmt.Sprintf("%s %s: %v", c.method, target, err),
					Err:    err,
				}
			}
		case status >= 200 && status < 300:
			if out == nil || len(answer) == 0 {
				return nil
			}
			if err := json.Unmarshal(answer, out); err != nil {
				return &Error{Status: status, Code: "api_error", Detail: fmt.Sprintf("%s %s: the answer is not what the API says: %v", c.method, target, err)}
			}
			return nil
		default:
			problem := problemOf(status, header, answer)
			if !retryable(status) || last {
				return problem
			}
			retryAfter = problem.RetryAfter
		}
		if err := sleep(ctx, policy.Delay(retry, retryAfter)); err != nil {
			return err
		}
	}
}

// send makes one try of c: the answer's status, body and headers, or the
// transport's error (a timeout of the try included).
func (q *Queue) send(ctx context.Context, c call, target string, body []byte, timeout time.Duration) (int, []byte, http.Header, error) {
	tryCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tryCtx, c.method, target, reader)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if q.token != "" {
		req.Header.Set("Authorization", "Bearer "+q.token)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	resp, err := q.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, answer, resp.Header, nil
}

func retryable(status int) bool { return status == 502 || status == 503 || status == 504 }

// problemOf is the *Error of an error answer: its problem+json, or what its
// status says when the body is not one.
func problemOf(status int, header http.Header, body []byte) *Error {
	var p struct {
		Title  string       `json:"title"`
		Detail string       `json:"detail"`
		Code   string       `json:"code"`
		Reason string       `json:"reason"`
		Errors []FieldError `json:"errors"`
	}
	if json.Unmarshal(body, &p) != nil {
		p.Detail = strings.TrimSpace(string(body))
		if len(p.Detail) > 500 {
			p.Detail = p.Detail[:500]
		}
	}
	code := p.Code
	if code == "" {
		code = codeByStatus[status]
	}
	if code == "" {
		code = "api_error"
	}
	if p.Title == "" {
		p.Title = http.StatusText(status)
	}
	return &Error{
		Status:     status,
		Code:       code,
		Title:      p.Title,
		Detail:     p.Detail,
		Reason:     p.Reason,
		RetryAfter: retryAfterOf(header),
		Fields:     p.Errors,
	}
}

// retryAfterOf reads Retry-After in seconds (the service's form) or as an HTTP date.
func retryAfterOf(header http.Header) time.Duration {
	value := strings.TrimSpace(header.Get("Retry-After"))
	if value == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(value, 64); err == nil && secs >= 0 {
		return duration(secs)
	}
	if at, err := http.ParseTime(value); err == nil {
		if wait := time.Until(at); wait > 0 {
			return wait
		}
	}
	return 0
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unreachable reports whether err says the service could not be reached (or
// answered 502, 503 or 504) after the retries: worth trying again later.
func unreachable(err error) bool {
	var netErr net.Error
	return errors.Is(err, ErrUnavailable) || errors.As(err, &netErr)
}

const userAgent = "leaseq-go/0.1"
