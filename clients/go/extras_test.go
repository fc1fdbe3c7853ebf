package leaseq

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// The service's calls beyond the queue API, against a real service.

func TestABatchLeaseAndACompletionThatLeasesTheNextUnderOneKey(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	pushN(t, q, session, 5, nil)
	leases, err := q.Lease(ctx, LeaseRequest{Session: session, Owner: "w1", Max: 2, TTL: 20 * time.Second})
	if err != nil || len(leases) != 2 || leases[0].TTL != 20*time.Second {
		t.Fatalf("batch lease: %v %v", leases, err)
	}
	next := LeaseRequest{Session: session, Owner: "w1", Max: 2}
	key := newKey()
	lead, taken, err := q.CompleteAndLease(ctx, leases[0], Completion{Result: map[string]int{"n": 1}}, next, key)
	if err != nil || lead.Status != Done || string(lead.Result) != `{"n":1}` || len(taken) != 2 {
		t.Fatalf("complete and lease: %+v %v %v", lead, taken, err)
	}
	// The same request again under its key (an answer lost): the same leases, nothing more.
	lead2, again, err := q.CompleteAndLease(ctx, leases[0], Completion{Result: map[string]int{"n": 1}}, next, key)
	if err != nil || lead2.Status != Done || len(again) != 2 || again[0].Token != taken[0].Token || again[1].Lead.ID != taken[1].Lead.ID {
		t.Fatalf("repeated: %v %v", again, err)
	}
	// A batch: one item of a lease still held, one of a lease completed already as
	// failed (lost), and the next lead leased whatever their answers.
	items := []CompleteItem{ItemOf(leases[1], Completion{Status: Cached}), ItemOf(leases[0], Completion{Status: Failed, Error: "no"})}
	results, more, err := q.CompleteBatch(ctx, items, &LeaseRequest{Session: session, Owner: "w1", Max: 5}, "")
	if err != nil || len(results) != 2 || !results[0].OK || results[1].OK || results[1].Code != "lease_lost" || len(more) != 1 {
		t.Fatalf("complete batch: %+v %v %v", results, more, err)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil || stats.Done != 1 || stats.Cached != 1 || stats.Leased != 3 || stats.Queued != 0 {
		t.Fatalf("stats: %+v %v", stats, err)
	}
}

func TestARenewalsCheckpointIsHandedToTheNextHolder(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	pushN(t, q, session, 2, nil)
	leases, err := q.Lease(ctx, LeaseRequest{Session: session, Owner: "w1", Max: 2})
	if err != nil || len(leases) != 2 {
		t.Fatal(leases, err)
	}
	if ok, err := q.Checkpoint(ctx, leases[0], map[string]int{"page": 7}); !ok || err != nil {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	if _, err := q.Checkpoint(ctx, leases[0], nil); !errors.Is(err, ErrValidation) {
		t.Fatalf("a null checkpoint: %v", err)
	}
	results, err := q.RenewBatch(ctx, []RenewItem{
		{LeadID: leases[1].Lead.ID, Token: leases[1].Token, TTL: 40 * time.Second, Checkpoint: []int{1}},
		{LeadID: leases[0].Lead.ID, Token: "not-the-token"},
	})
	if err != nil || !results[0].OK || results[0].TTL != 40*time.Second || results[1].OK || results[1].Code != "lease_lost" {
		t.Fatalf("renew batch: %+v %v", results, err)
	}
	if err := q.Release(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	again, err := q.LeaseNext(ctx, session, "w2")
	if err != nil || again == nil || again.Lead.ID != leases[0].Lead.ID || string(again.Lead.Checkpoint) != `{"page":7}` {
		t.Fatalf("the next holder: %+v %v", again, err)
	}
}

func TestWaitLeadCancelAndRetry(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := pushN(t, q, session, 2, nil)
	lease, err := q.LeaseNext(ctx, session, "w1")
	if err != nil || lease == nil {
		t.Fatal(err)
	}
	finished := make(chan *Lead, 1)
	go func() {
		lead, err := q.WaitLead(ctx, lease.Lead.ID, time.Minute)
		if err != nil {
			t.Error(err)
		}
		finished <- lead
	}()
	if err := q.Complete(ctx, lease, Done); err != nil {
		t.Fatal(err)
	}
	if lead := <-finished; lead == nil || lead.Status != Done {
		t.Fatalf("waited: %+v", lead)
	}
	// A wait that ends first answers the lead as it is.
	if lead, err := q.WaitLead(ctx, leads[1].ID, 100*time.Millisecond); err != nil || lead.Status != Queued {
		t.Fatalf("a short wait: %+v %v", lead, err)
	}
	cancelled, err := q.CancelLead(ctx, leads[1].ID)
	if err != nil || cancelled.Status != Failed || cancelled.Error != "cancelled" {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}
	if _, err := q.CancelLead(ctx, leads[1].ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("cancelling a failed lead: %v", err)
	}
	if _, err := q.RetryLead(ctx, leads[0].ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("retrying a done lead: %v", err)
	}
	retried, err := q.RetryLead(ctx, leads[1].ID)
	if err != nil || retried.Status != Queued {
		t.Fatalf("retry: %+v %v", retried, err)
	}
}

func TestSettingsPauseAndResume(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	two := 2
	settings, err := q.PutSettings(ctx, session, Settings{Weight: 3, MaxLeased: &two})
	if err != nil || settings.Weight != 3 || settings.MaxLeased == nil || *settings.MaxLeased != 2 || settings.RatePerS != nil {
		t.Fatalf("put: %+v %v", settings, err)
	}
	pushN(t, q, session, 3, nil)
	paused, err := q.Pause(ctx, session, 0)
	if err != nil || paused.PausedUntil.IsZero() || paused.Weight != 3 {
		t.Fatalf("pause: %+v %v", paused, err)
	}
	if lease, err := q.LeaseNext(ctx, session, "w1"); lease != nil || err != nil {
		t.Fatalf("a paused session leased: %v %v", lease, err)
	}
	resumed, err := q.Resume(ctx, session)
	if err != nil || !resumed.PausedUntil.IsZero() {
		t.Fatalf("resume: %+v %v", resumed, err)
	}
	leases, err := q.Lease(ctx, LeaseRequest{Session: session, Owner: "w1", Max: 3})
	if err != nil || len(leases) != 2 {
		t.Fatalf("capped at 2 leased: %d %v", len(leases), err)
	}
	got, err := q.GetSettings(ctx, session)
	if err != nil || got.Weight != 3 {
		t.Fatalf("get: %+v %v", got, err)
	}
}

func TestTokensAreCreatedListedAndRevoked(t *testing.T) {
	q, ctx := newQueue(t, ""), testContext(t)
	name := "go-" + newSession(t)[len(t.Name())+1:]
	token, err := q.CreateToken(ctx, NewToken{Name: name, Role: "worker", Sessions: "go-*", Expires: time.Hour})
	if err != nil || !strings.HasPrefix(token.Token, "lq_") || token.Name != name || token.ExpiresAt.IsZero() {
		t.Fatalf("create: %+v %v", token, err)
	}
	listed, err := q.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, each := range listed {
		if each.Name == name {
			found = each.Token == "" && each.Role == "worker"
		}
	}
	if !found {
		t.Fatalf("%s not listed without its token: %+v", name, listed)
	}
	revoked, err := q.RevokeToken(ctx, name)
	if err != nil || revoked.RevokedAt.IsZero() {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	if _, err := q.CreateToken(ctx, NewToken{Role: "nobody", Sessions: "*"}); !errors.Is(err, ErrValidation) {
		t.Fatalf("an unknown role: %v", err)
	}
}

// The contract's round-4 calls, on a service that has them (the test says so when not).

func skipWithout(t *testing.T, err error, what string) {
	t.Helper()
	var e *Error
	if errors.As(err, &e) && ((e.Status == 404 && strings.HasPrefix(e.Detail, "no route")) || e.Status == 405) {
		t.Skipf("the service has no %s yet", what)
	}
}

func TestListingLeadsAPageAtATimeAndRetryingThemInBulk(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	leads := pushN(t, q, session, 5, nil)
	page, err := q.ListLeads(ctx, session, LeadQuery{Order: "oldest", Limit: 2})
	skipWithout(t, err, "GET /sessions/{session}/leads")
	if err != nil || len(page.Leads) != 2 || page.Leads[0].ID != leads[0].ID || page.NextCursor == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	rest, err := q.ListLeads(ctx, session, LeadQuery{Order: "oldest", Limit: 10, Cursor: page.NextCursor})
	if err != nil || len(rest.Leads) != 3 || rest.Leads[0].ID != leads[2].ID || rest.NextCursor != "" {
		t.Fatalf("the rest: %+v %v", rest, err)
	}
	cancelled, err := q.CancelLeads(ctx, session, Selection{IDs: []int64{leads[0].ID, leads[1].ID}})
	if err != nil || cancelled.Changed != 2 || cancelled.More {
		t.Fatalf("cancel by ids: %+v %v", cancelled, err)
	}
	failed, err := q.ListLeads(ctx, session, LeadQuery{LeadFilter: LeadFilter{Statuses: []LeadStatus{Failed}, Error: "CANCEL"}})
	if err != nil || len(failed.Leads) != 2 {
		t.Fatalf("the failed ones: %+v %v", failed, err)
	}
	retried, err := q.RetryLeads(ctx, session, Selection{Filter: &LeadFilter{Statuses: []LeadStatus{Failed}}})
	if err != nil || retried.Changed != 2 || retried.More {
		t.Fatalf("retry by filter: %+v %v", retried, err)
	}
	if _, err := q.ListLeads(ctx, session, LeadQuery{Cursor: "not-a-cursor"}); !errors.Is(err, ErrValidation) {
		t.Fatalf("a bad cursor: %v", err)
	}
}

func TestScalingSignal(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	pushN(t, q, session, 3, nil)
	scaling, err := q.Scaling(ctx, session, 30*time.Second)
	skipWithout(t, err, "GET /sessions/{session}/scaling")
	if err != nil || scaling.Session != session || scaling.Backlog != 3 || scaling.SuggestedWorkers < 0 {
		t.Fatalf("scaling: %+v %v", scaling, err)
	}
	if _, err := q.Scaling(ctx, session, -time.Second); !errors.Is(err, ErrValidation) {
		t.Fatalf("a negative target: %v", err)
	}
}

func TestEveryLeaseCarriesAFenceTheServicesKeysVerify(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	pushN(t, q, session, 1, nil)
	lease, err := q.LeaseNext(ctx, session, "w1")
	if err != nil || lease == nil {
		t.Fatal(err)
	}
	if lease.Fence == "" {
		t.Skip("the service's leases carry no fence yet")
	}
	keys := os.Getenv("LEASEQ_TEST_FENCE_KEYS")
	if keys == "" {
		t.Skip("LEASEQ_TEST_FENCE_KEYS names none of the service's LEASEQ_FENCE_KEYS")
	}
	fence, err := VerifyFence(lease.Fence, strings.Split(keys, ","))
	if err != nil || fence.LeadID != lease.Lead.ID || fence.Attempt != lease.Attempt {
		t.Fatalf("verify %q: %+v %v", lease.Fence, fence, err)
	}
	first := lease.Fence
	if ok, err := q.Renew(ctx, lease); !ok || err != nil {
		t.Fatal(ok, err)
	}
	renewed, err := VerifyFence(lease.Fence, strings.Split(keys, ","))
	if err != nil || renewed.Attempt != fence.Attempt || renewed.ExpiresAt.Before(fence.ExpiresAt) || lease.Fence == "" {
		t.Fatalf("the renewal's fence %q (was %q): %+v %v", lease.Fence, first, renewed, err)
	}
}

func TestAPushPastMaxQueuedIsQuotaExceededWithRetryAfterAndStoresNothing(t *testing.T) {
	q, session, ctx := newQueue(t, ""), newSession(t), testContext(t)
	two := 2
	_, err := q.PutSettings(ctx, session, Settings{MaxQueued: &two})
	if errors.Is(err, ErrValidation) {
		t.Skip("the service's settings have no max_queued yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	pushN(t, q, session, 1, nil)
	err = q.Push(ctx, []Lead{{SessionID: session}, {SessionID: session}})
	var e *Error
	if !errors.Is(err, ErrQuotaExceeded) || !errors.As(err, &e) || e.Status != 429 || e.RetryAfter <= 0 {
		t.Fatalf("past max_queued: %#v", err)
	}
	stats, err := q.Stats(ctx, session)
	if err != nil || stats.Queued != 1 {
		t.Fatalf("none of the batch stored: %+v %v", stats, err)
	}
	var payload json.RawMessage = []byte(`{"last":true}`)
	if err := q.Push(ctx, []Lead{{SessionID: session, Payload: payload}}); err != nil {
		t.Fatalf("a push within the bound: %v", err)
	}
}
