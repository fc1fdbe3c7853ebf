// Command drain is a program written against the queue package leaseq grew
// from: it pushes a session's leads, and W workers each lease one, keep its
// lease alive with heartbeats, handle it and complete it, until LeaseNext
// finds nothing queued. Moving it to leaseq changed its imports (core and
// queue both name leaseq's Go client) and its constructor (queue.New takes
// the service's URL where it took a store); not a line else.
//
//	go run ./examples/drain -url http://127.0.0.1:8000 -session demo -leads 100 -workers 4
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	core "github.com/leaseq/leaseq/clients/go"  // was: the project's core package
	queue "github.com/leaseq/leaseq/clients/go" // was: the project's queue package
)

func main() {
	url := flag.String("url", os.Getenv("LEASEQ_URL"), "the leaseq service")
	session := flag.String("session", "demo", "the session to fill and drain")
	leads := flag.Int("leads", 100, "how many leads to push")
	workers := flag.Int("workers", 4, "how many workers drain it")
	flag.Parse()
	ctx := context.Background()

	q, err := queue.New(*url, queue.WithTTL(30*time.Second)) // was: q := queue.New(st, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if err := push(ctx, q, *session, *leads); err != nil {
		log.Fatal(err)
	}
	handled, err := drain(ctx, q, *session, *workers, func(lead *core.Lead) {})
	if err != nil {
		log.Fatal(err)
	}
	stats, err := q.Stats(ctx, *session)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("handled %d; done %d, pending %d\n", len(handled), stats.Done, stats.Pending())
}

// push queues n leads into the session, each with its number as its payload.
func push(ctx context.Context, q *queue.Queue, session string, n int) error {
	leads := make([]core.Lead, n)
	for i := range leads {
		payload, _ := json.Marshal(map[string]int{"n": i})
		leads[i] = core.Lead{SessionID: session, Payload: payload, Priority: i % 3}
	}
	return q.Push(ctx, leads)
}

// drain runs workers until each finds nothing to lease; it returns the ids of
// the leads handled and completed, in the order they were.
func drain(ctx context.Context, q *queue.Queue, session string, workers int, handle func(*core.Lead)) ([]int64, error) {
	var mu sync.Mutex
	var handled []int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		owner := fmt.Sprintf("worker-%d", w)
		go func() {
			errs <- work(ctx, q, session, owner, handle, func(id int64) {
				mu.Lock()
				handled = append(handled, id)
				mu.Unlock()
			})
		}()
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return handled, first
}

// work is one worker: lease, heartbeat while handling, complete; it stops when
// LeaseNext returns nil (a lead another worker holds is not work it can take).
func work(ctx context.Context, q *queue.Queue, session, owner string, handle func(*core.Lead), completed func(int64)) error {
	for {
		lease, err := q.LeaseNext(ctx, session, owner)
		if err != nil {
			return err
		}
		if lease == nil {
			return nil
		}
		lost := heartbeat(ctx, q, lease, func() { handle(lease.Lead) })
		if lost {
			continue // the lead is someone else's now: do not finish it
		}
		switch err := q.Complete(ctx, lease, core.Done); {
		case errors.Is(err, queue.ErrLeaseLost):
			continue
		case err != nil:
			return err
		}
		completed(lease.Lead.ID)
	}
}

// heartbeat renews the lease every third of its TTL while run runs, and
// reports whether a renewal found the lease gone.
func heartbeat(ctx context.Context, q *queue.Queue, lease *queue.Lease, run func()) bool {
	stop := make(chan struct{})
	result := make(chan bool, 1)
	go func() {
		ticker := time.NewTicker(q.TTL() / 3)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				result <- false
				return
			case <-ticker.C:
				if ok, err := q.Renew(ctx, lease); err == nil && !ok {
					<-stop
					result <- true
					return
				}
			}
		}
	}()
	run()
	close(stop)
	return <-result
}
