// Command leaseq-conformance is the Go client's worker for the clients'
// conformance set (tests/clients): a Worker at its defaults but for the
// options below, whose handler writes what it does to an events file.
//
//	leaseq-conformance --url URL --session S --owner NAME --concurrency W \
//	    --ttl-s T --handler-ms MS --events FILE [--token TOKEN] [--grace-s G]
//
// Each lead's handler writes {"event":"start",...}, waits the payload's "ms"
// (else --handler-ms) milliseconds, stopping early when its ctx is cancelled
// ({"event":"aborted",...}), else writes {"event":"finished",...} and
// returns {"lead": ID, "by": "go"}, or an error when the payload's "fail" is
// true. On SIGTERM (or SIGINT) the worker leases no more, gives running
// handlers the grace, releases what it holds, writes {"event":"stopped"} and
// exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	leaseq "github.com/leaseq/leaseq/clients/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "leaseq-conformance:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "", "the service (required)")
	session := flag.String("session", "", "the session to work (required)")
	owner := flag.String("owner", "", "the worker's name (required)")
	concurrency := flag.Int("concurrency", 0, "handler slots (required)")
	ttlS := flag.Float64("ttl-s", 0, "the lease ttl asked for, in seconds (required)")
	handlerMs := flag.Int("handler-ms", -1, "how long a handler works unless the payload says (required)")
	eventsPath := flag.String("events", "", "the events file, JSON lines (required)")
	token := flag.String("token", "", "a bearer token")
	graceS := flag.Float64("grace-s", 5, "the shutdown grace, in seconds")
	flag.Parse()
	if *url == "" || *session == "" || *owner == "" || *concurrency < 1 || *ttlS <= 0 || *handlerMs < 0 || *eventsPath == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("missing or bad arguments")
	}
	opts := []leaseq.Option{leaseq.WithTTL(seconds(*ttlS))}
	if *token != "" {
		opts = append(opts, leaseq.WithToken(*token))
	}
	q, err := leaseq.New(*url, opts...)
	if err != nil {
		return err
	}
	events, err := openEvents(*eventsPath)
	if err != nil {
		return err
	}
	defer events.Close()
	handler := func(ctx context.Context, job *leaseq.Job) (any, error) {
		return handle(ctx, job, events, *owner, time.Duration(*handlerMs)*time.Millisecond)
	}
	worker, err := leaseq.NewWorker(q, *session, handler,
		leaseq.WithOwner(*owner), leaseq.WithConcurrency(*concurrency), leaseq.WithGrace(seconds(*graceS)))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	events.write(map[string]any{"event": "ready", "t": now()})
	err = worker.Run(ctx)
	events.write(map[string]any{"event": "stopped", "t": now()})
	return err
}

// handle is the handler of every lead: start, a wait that stops with ctx, finished or aborted.
func handle(ctx context.Context, job *leaseq.Job, events *eventLog, owner string, work time.Duration) (any, error) {
	var payload struct {
		Ms   *float64 `json:"ms"`
		Fail bool     `json:"fail"`
	}
	_ = json.Unmarshal(job.Payload(), &payload) // another payload: the defaults
	if payload.Ms != nil {
		work = time.Duration(*payload.Ms * float64(time.Millisecond))
	}
	event := func(name string) {
		events.write(map[string]any{"event": name, "lead": job.ID(), "attempt": job.Attempt(), "owner": owner, "t": now()})
	}
	event("start")
	timer := time.NewTimer(work)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		event("aborted")
		return nil, ctx.Err()
	}
	event("finished")
	if payload.Fail {
		return nil, errors.New("the payload asked to fail")
	}
	return map[string]any{"lead": job.ID(), "by": "go"}, nil
}

// eventLog appends one JSON line per event, each in one write, at once.
type eventLog struct {
	mu   sync.Mutex
	file *os.File
}

func openEvents(path string) (*eventLog, error) {
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &eventLog{file: file}, nil
}

func (e *eventLog) write(event map[string]any) {
	line, _ := json.Marshal(event)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.file.Write(append(line, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "leaseq-conformance: the events file:", err)
	}
}

func (e *eventLog) Close() error { return e.file.Close() }

func now() int64 { return time.Now().UnixMilli() }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
