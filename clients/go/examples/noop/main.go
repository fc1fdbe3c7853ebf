// Command noop runs a Worker at its defaults, with a handler that does
// nothing, until the session is empty: the Go worker that python -m bench
// measures beside the other clients and the peers' own workers.
//
//	go run ./examples/noop -url http://127.0.0.1:8000 -session bench -concurrency 4
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	leaseq "github.com/leaseq/leaseq/clients/go"
)

func main() {
	url := flag.String("url", os.Getenv("LEASEQ_URL"), "the leaseq service")
	session := flag.String("session", "", "the session to drain")
	concurrency := flag.Int("concurrency", 1, "handlers at once")
	wait := flag.Duration("wait", 500*time.Millisecond, "the lease's long poll: the worker stops this long after the session is empty")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	q, err := leaseq.New(*url)
	if err != nil {
		log.Fatal(err)
	}
	noop := func(ctx context.Context, job *leaseq.Job) (any, error) { return nil, nil }
	worker, err := leaseq.NewWorker(q, *session, noop,
		leaseq.WithConcurrency(*concurrency), leaseq.WithWait(*wait), leaseq.WithStopWhenEmpty(), leaseq.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
