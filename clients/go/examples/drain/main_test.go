package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	core "github.com/leaseq/leaseq/clients/go"
	queue "github.com/leaseq/leaseq/clients/go"
)

func TestTheProgramOfTheQueueAPIDrainsASessionOnceEach(t *testing.T) {
	url := os.Getenv("LEASEQ_TEST_URL")
	if url == "" {
		t.Skip("no service: set LEASEQ_TEST_URL to a leaseq serve's URL (tests/clients/test_go.py starts one)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, err := queue.New(url, queue.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	session := fmt.Sprintf("drain-%d", time.Now().UnixNano())
	const n, workers = 300, 4
	if err := push(ctx, q, session, n); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	handled, err := drain(ctx, q, session, workers, func(lead *core.Lead) {
		mu.Lock()
		seen[lead.ID]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(handled) != n || len(seen) != n {
		t.Fatalf("%d completed, %d handled, want %d", len(handled), len(seen), n)
	}
	for id, times := range seen {
		if times != 1 {
			t.Fatalf("lead %d handled %d times", id, times)
		}
	}
	stats, err := q.Stats(ctx, session)
	if err != nil || stats.Done != n || stats.Pending() != 0 {
		t.Fatalf("stats %+v %v", stats, err)
	}
	report, err := q.Report(ctx, session)
	if err != nil || report.Completions != n || report.DoubleCompletions != 0 || report.OverlappingLeases != 0 {
		t.Fatalf("report %+v %v", report, err)
	}
}
