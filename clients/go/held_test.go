package leaseq

import (
	"testing"
	"time"
)

// A lease's time on the worker's clock (held.go), with instants made up: no service.

func newTestHeld(sent, received time.Time, ttl time.Duration) *held {
	return newHeld(&Lease{Lead: &Lead{ID: 1}}, sent, received, ttl, -1)
}

func TestALeaseIsTimedFromItsSendAndStopsAKillGraceAndAMarginBeforeItsEnd(t *testing.T) {
	sent := time.Unix(1000, 0)
	h := newTestHeld(sent, sent.Add(200*time.Millisecond), 30*time.Second)
	if !h.confirmed {
		t.Fatal("a fresh lease is confirmed")
	}
	if h.validUntil != sent.Add(30*time.Second) || h.renewAt != sent.Add(10*time.Second) {
		t.Fatalf("valid until %v, renew at %v", h.validUntil, h.renewAt)
	}
	// Kill grace 2 s, margin 1 s: stop 3 s before the end.
	if h.killGrace != 2*time.Second || h.stopAt() != sent.Add(27*time.Second) {
		t.Fatalf("kill grace %v, stop at %v", h.killGrace, h.stopAt())
	}
	if h.due(sent.Add(27*time.Second-time.Nanosecond), 0) != "" || h.due(sent.Add(27*time.Second), 0) != StopExpired {
		t.Fatal("due at the stop, not before")
	}
	// A renewal sent at 10 s, answered late: valid from its send, not its answer.
	h.renewed(sent.Add(10*time.Second), 30*time.Second)
	if h.validUntil != sent.Add(40*time.Second) || h.renewAt != sent.Add(20*time.Second) {
		t.Fatalf("after a renewal: valid until %v, renew at %v", h.validUntil, h.renewAt)
	}
	// An older renewal confirmed after a newer one never shortens the lease.
	h.renewed(sent.Add(5*time.Second), 30*time.Second)
	if h.validUntil != sent.Add(40*time.Second) {
		t.Fatalf("shortened to %v", h.validUntil)
	}
}

func TestAShortLeasesKillGraceIsATenthOfItsTTLAndNeverMoreThanLeavesHalfForRenewals(t *testing.T) {
	for _, c := range []struct {
		ttl, asked, want time.Duration
	}{
		{3 * time.Second, -1, 300 * time.Millisecond},
		{300 * time.Second, -1, 2 * time.Second},
		{10 * time.Second, 3 * time.Second, 3 * time.Second},
		{10 * time.Second, 9 * time.Second, 4 * time.Second}, // half the ttl less the margin (1 s)
		{time.Second, -1, 100 * time.Millisecond},
	} {
		if got := killGraceFor(c.ttl, c.asked); got != c.want {
			t.Errorf("ttl %v, asked %v: %v, want %v", c.ttl, c.asked, got, c.want)
		}
	}
}

func TestALeaseThatCameLateIsConfirmedBeforeItRunsAndEndsUnconfirmed(t *testing.T) {
	sent := time.Unix(1000, 0)
	// A long poll that waited 12 s for a 30 s lease: its first renewal was due at 10 s.
	h := newTestHeld(sent, sent.Add(12*time.Second), 30*time.Second)
	if h.confirmed {
		t.Fatal("a lease answered after its first renewal was due is not confirmed")
	}
	if h.neededBy() != sent.Add(42*time.Second) || h.deadline(0) != sent.Add(42*time.Second) {
		t.Fatalf("needed by %v", h.neededBy())
	}
	if h.due(sent.Add(41*time.Second), 0) != "" || h.due(sent.Add(42*time.Second), 0) != StopExpired {
		t.Fatal("unconfirmed: over at its answer plus the ttl")
	}
	h.renewed(sent.Add(13*time.Second), 30*time.Second)
	if !h.confirmed || h.stopAt() != sent.Add(40*time.Second) {
		t.Fatalf("confirmed %v, stop at %v", h.confirmed, h.stopAt())
	}
}

func TestAMaximumRuntimeCountsFromTheHandlersStart(t *testing.T) {
	sent := time.Unix(1000, 0)
	h := newTestHeld(sent, sent, 60*time.Second)
	if h.deadline(5*time.Second) != h.stopAt() {
		t.Fatal("before the handler starts, only the lease's stop")
	}
	h.started = sent.Add(10 * time.Second)
	if h.deadline(5*time.Second) != sent.Add(15*time.Second) || h.due(sent.Add(15*time.Second), 5*time.Second) != StopMaxRuntime {
		t.Fatalf("deadline %v", h.deadline(5*time.Second))
	}
}

func TestAFailedRenewalIsTriedAgainSoonDoublingUpToATwentiethOfTheTTL(t *testing.T) {
	ttl := 30 * time.Second
	var got []time.Duration
	for failures := 1; failures <= 7; failures++ {
		got = append(got, renewBackoff(failures, ttl))
	}
	want := []time.Duration{100, 200, 400, 800, 1500, 1500, 1500}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("backoffs %v", got)
		}
	}
	if renewBackoff(10, 600*time.Second) != 2*time.Second || renewBackoff(3, time.Second) != 100*time.Millisecond {
		t.Fatal("the backoff's bounds")
	}
	sent := time.Unix(1000, 0)
	h := newTestHeld(sent, sent, ttl)
	h.renewFailed(sent.Add(10*time.Second), 0)
	if h.renewAt != sent.Add(10*time.Second+100*time.Millisecond) || h.renewFailures != 1 {
		t.Fatalf("renew at %v", h.renewAt)
	}
	// A Retry-After is waited while the lease leaves time for it (its stop is at 27 s)...
	h.renewFailed(sent.Add(11*time.Second), time.Second)
	if h.renewAt != sent.Add(12*time.Second) {
		t.Fatalf("after a Retry-After of 1s: renew at %v", h.renewAt)
	}
	// ... and never more than half of what is left before the stop.
	h.renewFailed(sent.Add(23*time.Second), time.Minute)
	if h.renewAt != sent.Add(25*time.Second) {
		t.Fatalf("after a Retry-After of a minute: renew at %v", h.renewAt)
	}
}

func TestLosingTheLeaseOverridesAnEarlierReasonAndCancelsTheHandler(t *testing.T) {
	sent := time.Unix(1000, 0)
	h := newTestHeld(sent, sent, 30*time.Second)
	cancelled := 0
	h.cancel = func() { cancelled++ }
	h.interrupt(StopShutdown)
	h.interrupt(StopMaxRuntime)
	if h.reason != StopShutdown {
		t.Fatalf("reason %q", h.reason)
	}
	h.interrupt(StopLost)
	if h.reason != StopLost || cancelled != 3 {
		t.Fatalf("reason %q, cancelled %d", h.reason, cancelled)
	}
}
