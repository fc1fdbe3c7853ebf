package leaseq

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// The queue API over REST, against a real service.

func TestPushSetsEachLeadsIDAndAKeyAlreadyInItsSessionStandsForItsLead(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := []Lead{
		{SessionID: session, Key: "a", Payload: json.RawMessage(`{"n":1}`)},
		{SessionID: session, Priority: 5},
		{SessionID: session, Key: "a", Payload: json.RawMessage(`{"n":2}`)},
	}
	result, err := q.PushIDs(ctx, leads)
	if err != nil {
		t.Fatal(err)
	}
	if result.Created != 2 || result.Duplicates != 1 || len(result.IDs) != 3 {
		t.Fatalf("push: %+v", result)
	}
	if leads[0].ID == 0 || leads[0].ID != leads[2].ID || leads[1].ID == leads[0].ID {
		t.Fatalf("ids: %d %d %d", leads[0].ID, leads[1].ID, leads[2].ID)
	}
	got, err := q.GetLead(ctx, leads[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != `{"n":1}` || got.Key != "a" || got.SessionID != session || got.Status != Queued {
		t.Fatalf("the first of the key stands: %+v", got)
	}
}

func TestLeasesFollowPriorityThenAgeAndLeaseNextIsNilWhenNothingIsQueued(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := []Lead{{SessionID: session}, {SessionID: session, Priority: 9}, {SessionID: session}}
	if err := q.Push(ctx, leads); err != nil {
		t.Fatal(err)
	}
	var order []int64
	for {
		lease, err := q.LeaseNext(ctx, session, "w1")
		if err != nil {
			t.Fatal(err)
		}
		if lease == nil {
			break
		}
		if lease.Owner != "w1" || lease.Attempt != 1 || lease.TTL != DefaultLeaseTTL || lease.Lead.Status != Leased {
			t.Fatalf("lease: %+v", lease)
		}
		order = append(order, lease.Lead.ID)
	}
	want := []int64{leads[1].ID, leads[0].ID, leads[2].ID}
	if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("leased %v, want %v", order, want)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Leased != 3 || stats.Queued != 0 || stats.Pending() != 3 {
		t.Fatalf("stats: %+v", stats)
	}
}

func TestRenewCompleteAndReleaseKeepTheOriginsPromise(t *testing.T) {
	q, session, ctx := newQueue(t, "", WithTTL(30*time.Second)), newSession(t), testContext(t)
	if q.TTL() != 30*time.Second {
		t.Fatalf("TTL: %v", q.TTL())
	}
	pushN(t, q, session, 2, nil)
	first, err := q.LeaseNext(ctx, session, "w1")
	if err != nil || first == nil {
		t.Fatalf("lease: %v %v", first, err)
	}
	if first.TTL != 30*time.Second {
		t.Fatalf("the lease's ttl: %v", first.TTL)
	}
	renewed, err := q.Renew(ctx, first)
	if err != nil || !renewed {
		t.Fatalf("renew: %v %v", renewed, err)
	}
	if err := q.Complete(ctx, first, Done); err != nil {
		t.Fatal(err)
	}
	if first.Lead.Status != Done {
		t.Fatalf("the lead as finished: %+v", first.Lead)
	}
	// The same completion again (its answer lost) answers as the first did.
	if err := q.Complete(ctx, first, Done); err != nil {
		t.Fatalf("a repeated completion: %v", err)
	}
	// Any other use of a finished lease is lease lost, the origins' sentinel itself.
	if err := q.Complete(ctx, first, Failed); err != ErrLeaseLost {
		t.Fatalf("completing again as failed: %v, want ErrLeaseLost", err)
	}
	if renewed, err := q.Renew(ctx, first); renewed || err != nil {
		t.Fatalf("renewing a finished lease: %v %v, want false, nil", renewed, err)
	}
	if err := q.Release(ctx, first); err != ErrLeaseLost {
		t.Fatalf("releasing a finished lease: %v, want ErrLeaseLost", err)
	}

	second, err := q.LeaseNext(ctx, session, "w1")
	if err != nil || second == nil {
		t.Fatalf("lease: %v %v", second, err)
	}
	if err := q.Release(ctx, second); err != nil {
		t.Fatal(err)
	}
	again, err := q.LeaseNext(ctx, session, "w2")
	if err != nil || again == nil || again.Lead.ID != second.Lead.ID || again.Attempt != 2 {
		t.Fatalf("the released lead, leased again: %+v %v", again, err)
	}
	if err := q.Complete(ctx, second, Done); err != ErrLeaseLost {
		t.Fatalf("the old lease completing: %v, want ErrLeaseLost", err)
	}
	if err := q.Complete(ctx, again, Cached); err != nil {
		t.Fatal(err)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if stats != (Stats{Done: 1, Cached: 1}) {
		t.Fatalf("stats: %+v", stats)
	}
}

func TestSweepRequeuesOnlyExpiredLeasesOfItsSessionAndEmptyMeansEverySession(t *testing.T) {
	q, ctx := newQueue(t, "", WithTTL(time.Second)), testContext(t)
	long := newQueue(t, "")
	expiring, living := newSession(t), newSession(t)+"-b"
	pushN(t, q, expiring, 1, nil)
	pushN(t, q, living, 1, nil)
	short, err := q.LeaseNext(ctx, expiring, "w1")
	if err != nil || short == nil {
		t.Fatal(err)
	}
	held, err := long.LeaseNext(ctx, living, "w1")
	if err != nil || held == nil {
		t.Fatal(err)
	}
	// The one-second lease ends on the database's clock; the service's own sweeper may
	// requeue it first, so what is asserted is the outcome, not who swept.
	until(t, 30*time.Second, "the short lease to be requeued", func() bool {
		if _, err := q.Sweep(ctx, expiring); err != nil {
			t.Fatal(err)
		}
		stats, err := q.Stats(ctx, expiring)
		return err == nil && stats.Queued == 1
	})
	if _, err := q.Sweep(ctx, ""); err != nil {
		t.Fatal(err)
	}
	stats, err := q.Stats(ctx, living)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Leased != 1 {
		t.Fatalf("a valid lease was swept: %+v", stats)
	}
	if renewed, err := long.Renew(ctx, held); !renewed || err != nil {
		t.Fatalf("the living lease: %v %v", renewed, err)
	}
	total, err := q.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if total.Queued < 1 || total.Leased < 1 {
		t.Fatalf("every session's counts: %+v", total)
	}
}

func TestBadInputIsATypedErrorAndChangesNothing(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	var e *Error
	// Refused by the service: an owner must not be empty.
	_, err := q.LeaseNext(ctx, session, "")
	if !errors.Is(err, ErrValidation) || !errors.As(err, &e) || e.Status != 422 || e.Code != "validation_error" || len(e.Fields) == 0 {
		t.Fatalf("an empty owner: %#v", err)
	}
	// Refused by the client: a session's name that would name another path.
	if err := q.Push(ctx, []Lead{{SessionID: "../stats"}}); !errors.Is(err, ErrValidation) {
		t.Fatalf("a bad session: %v", err)
	}
	// Refused by the service: a payload that is not an object; nothing of the call is pushed.
	err = q.Push(ctx, []Lead{{SessionID: session}, {SessionID: session, Payload: json.RawMessage(`[1]`)}})
	if !errors.Is(err, ErrValidation) {
		t.Fatalf("a payload that is no object: %v", err)
	}
	if err := q.Push(ctx, []Lead{{SessionID: session, Payload: json.RawMessage(`{"a":`)}}); !errors.Is(err, ErrValidation) {
		t.Fatalf("a payload that is not JSON: %v", err)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Pending() != 0 {
		t.Fatalf("something was pushed: %+v", stats)
	}
	if _, err := q.GetLead(ctx, 1<<52); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no such lead: %v", err)
	}
}
